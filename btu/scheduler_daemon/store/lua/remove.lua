-- uses prepared.lua
-- Take one schedule out of the state, with the fires prepared for it.
-- KEYS[1] state key, KEYS[2] due sorted set, KEYS[3] site's schedule set,
-- KEYS[4] prepared sorted set, KEYS[5] the schedule's prepared index, KEYS[6] its definition.
-- ARGV: due member, name, rq job key prefix.
-- Returns 1 when the schedule was in the state, else 0.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
withdraw(KEYS[5], KEYS[4], ARGV[3], now_ms)
try('ZREM', KEYS[2], ARGV[1])
try('DEL', KEYS[1], KEYS[6])
try('SREM', RESYNC, ARGV[1])
local removed, err = try('SREM', KEYS[3], ARGV[2])
if err then
	move_aside(KEYS[3], err, now_ms)
	return 0
end
return removed

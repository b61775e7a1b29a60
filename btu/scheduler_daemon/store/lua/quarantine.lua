-- uses guard.lua
-- Move one key that holds a wrong value aside (guard.lua's move_aside), for
-- what the scheduler finds wrong outside a script (a spec that is not JSON, a
-- set of the wrong type). With a due member, that schedule is also taken off
-- the due set and rebuilt from its row by the next reconcile.
-- KEYS[1] the key, KEYS[2] the due sorted set; ARGV[1] why, ARGV[2] due member or ''.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
	move_aside(KEYS[1], ARGV[1], now_ms)
end
if ARGV[2] ~= '' then
	try('ZREM', KEYS[2], ARGV[2])
	resync(ARGV[2])
end
return 1

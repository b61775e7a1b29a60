-- uses guard.lua
-- Take the leader lease if nobody holds it.
-- KEYS[1] lease key, KEYS[2] epoch counter; ARGV[1] holder, ARGV[2] ttl ms,
-- ARGV[3] the longest ttl any process may set.
-- Returns the lease value "<epoch>|<holder>" (the fencing token), or false.
-- A lease key that no scheduler could have written (another type, another
-- form, no expiry or one beyond the longest ttl) would keep every process
-- standing by for ever: it is moved aside. So is an epoch that is not a number.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' then
	local value = kind == 'string' and redis.call('GET', KEYS[1])
	local ttl = redis.call('PTTL', KEYS[1])
	if value and string.match(value, '^%d+|.') and ttl > 0 and ttl <= tonumber(ARGV[3]) then
		return false
	end
	move_aside(KEYS[1], 'not a lease: a ' .. kind .. (value and (' "' .. value .. '"') or '') .. ' with ttl ' .. ttl .. ' ms', now_ms)
end
local epoch, err = try('INCR', KEYS[2])
if err then
	move_aside(KEYS[2], err, now_ms)
	epoch = redis.call('INCR', KEYS[2])
end
local value = epoch .. '|' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value

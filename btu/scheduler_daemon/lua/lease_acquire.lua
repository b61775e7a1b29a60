-- Take the leader lease if nobody holds it.
-- KEYS[1] lease key, KEYS[2] epoch counter; ARGV[1] holder, ARGV[2] ttl ms.
-- Returns the lease value "<epoch>|<holder>" (the fencing token), or false.
if redis.call('EXISTS', KEYS[1]) == 1 then
	return false
end
local epoch = redis.call('INCR', KEYS[2])
local value = epoch .. '|' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value

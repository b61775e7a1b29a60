-- Extend the lease if we still hold it. KEYS[1] lease key; ARGV[1] our value, ARGV[2] ttl ms.
-- A lease key of another type is not ours (lease_acquire.lua moves it aside).
local value = redis.pcall('GET', KEYS[1])
if value == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0

-- Give the lease up if we still hold it. KEYS[1] lease key; ARGV[1] our value.
local value = redis.pcall('GET', KEYS[1])
if value == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0

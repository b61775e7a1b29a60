-- Give the lease up if we still hold it. KEYS[1] lease key; ARGV[1] our value.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0

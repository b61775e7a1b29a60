-- uses prepared.lua
-- Take one schedule out of the state, with the fires prepared for it.
-- KEYS[1] state key, KEYS[2] due sorted set, KEYS[3] site's schedule set,
-- KEYS[4] prepared sorted set. ARGV: due member, name, rq job key prefix.
-- Returns 1 when the schedule was in the state, else 0.
withdraw(KEYS[4], ARGV[3], {[KEYS[1]] = true})
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return redis.call('SREM', KEYS[3], ARGV[2])

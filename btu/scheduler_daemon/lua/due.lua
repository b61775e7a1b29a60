-- What is due by now plus the prepare-ahead window, by Redis's clock.
-- KEYS[1] the due sorted set, KEYS[2] the prepared sorted set.
-- ARGV[1] batch size, ARGV[2] prepare-ahead ms.
-- Returns {now_us, next due fire_ms or false, next prepared fire_ms or false,
-- member1, score1, member2, score2, ...}: now in microseconds, as the leader
-- sleeps by it until the next moment.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms + tonumber(ARGV[2]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local function first(key)
	local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
	return #head > 0 and head[2] or false
end
local out = {now_us, #due == 0 and first(KEYS[1]), first(KEYS[2])}
for i = 1, #due do
	out[#out + 1] = due[i]
end
return out

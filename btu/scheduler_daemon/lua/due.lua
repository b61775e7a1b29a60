-- uses guard.lua
-- What is due by now plus the prepare-ahead window, by Redis's clock.
-- KEYS[1] the due sorted set, KEYS[2] the prepared sorted set.
-- ARGV[1] batch size, ARGV[2] prepare-ahead ms.
-- Returns {now_us, next due fire_ms or false, next prepared fire_ms or false,
-- moved (1 when a set was moved aside, else 0), member1, score1, member2,
-- score2, ...}: now in microseconds, as the leader sleeps by it until the
-- next moment.
-- Either set holding a wrong value is moved aside (the prepared set's members
-- cannot be told from junk then; the due set is rebuilt from every schedule's
-- state by the next reconcile, which '*' in the resync set asks for).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local moved = 0
for _, key in ipairs(KEYS) do
	local kind = redis.call('TYPE', key).ok
	if kind ~= 'zset' and kind ~= 'none' then
		move_aside(key, 'holds a ' .. kind .. ', not a sorted set', now_ms)
		resync('*')
		moved = 1
	end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms + tonumber(ARGV[2]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local function first(key)
	local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
	return #head > 0 and head[2] or false
end
local out = {now_us, #due == 0 and first(KEYS[1]), first(KEYS[2]), moved}
for i = 1, #due do
	out[#out + 1] = due[i]
end
return out

-- uses guard.lua
-- What is due by now plus the prepare-ahead window, by Redis's clock.
-- KEYS[1] the due sorted set, KEYS[2] the prepared sorted set.
-- ARGV[1] batch size, ARGV[2] prepare-ahead ms, ARGV[3] (optional) held ms:
-- fires due more than this long ago are left where they are (a new leader's
-- catch-up waits for its first reconcile, which drops what was deleted).
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
local low = ARGV[3] and (now_ms - tonumber(ARGV[3])) or '-inf'
local due = redis.call('ZRANGEBYSCORE', KEYS[1], low, now_ms + tonumber(ARGV[2]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local function first(key, from)
	local head = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
	return #head > 0 and head[2] or false
end
local out = {now_us, #due == 0 and first(KEYS[1], low), first(KEYS[2], '-inf'), moved}
for i = 1, #due do
	out[#out + 1] = due[i]
end
return out

-- What is due now, by Redis's clock. KEYS[1] the due sorted set; ARGV[1] batch size.
-- Returns {now_ms, next_fire_ms or false, member1, score1, member2, score2, ...}.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local nxt = false
if #due == 0 then
	local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
	if #first > 0 then
		nxt = first[2]
	end
end
local out = {now_ms, nxt}
for i = 1, #due do
	out[#out + 1] = due[i]
end
return out

-- uses guard.lua
-- Check that schedules' state agrees with itself, and mend what does not: a
-- state that is not a hash, or whose cursor or fire time is not a number, is
-- moved aside and rebuilt from its row; a schedule that should fire but is
-- missing from the due set, or stands there at another time than its fire
-- time, or one that should not fire but stands there, is put right. Prepared
-- members further ahead than any prepare writes (an hour) are junk.
-- KEYS[1] due sorted set, KEYS[2] prepared sorted set.
-- ARGV: due members of schedules whose site fires (not held).
-- Returns {mended, moved aside}.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mended, moved = 0, 0
for _, member in ipairs(ARGV) do
	local site, schedule = string.match(member, '^([^|]+)|(.+)$')
	if site then
		local state_key = schedule_key(site, schedule)
		local stored, err = try('HMGET', state_key, 'cursor', 'fire_at', 'paused', 'finished')
		if not err and stored[1] and not (string.match(stored[1], '^%d*$') and string.match(stored[2] or '', '^%d+$')) then
			err = 'cursor ' .. tostring(stored[1]) .. ' or fire_at ' .. tostring(stored[2]) .. ' is not a number'
		end
		local score = try('ZSCORE', KEYS[1], member)
		if err then
			move_aside(state_key, err, now_ms)
			resync(member)
			try('ZREM', KEYS[1], member)
			moved = moved + 1
		elseif stored[1] then
			local active = stored[1] ~= '' and stored[3] ~= '1' and stored[4] ~= '1'
			if active and tonumber(score) ~= tonumber(stored[2]) then
				try('ZADD', KEYS[1], stored[2], member)
				mended = mended + 1
			elseif not active and score then
				try('ZREM', KEYS[1], member)
				mended = mended + 1
			end
		end
	end
end
local junk = try('ZRANGEBYSCORE', KEYS[2], now_ms + 3600 * 1000, '+inf', 'LIMIT', 0, 1000) or {}
for _, member in ipairs(junk) do
	note(KEYS[2] .. ' member ' .. redis.sha1hex(member), 'prepared further ahead than any prepare writes', now_ms, member)
	try('ZREM', KEYS[2], member)
	moved = moved + 1
end
return {mended, moved}

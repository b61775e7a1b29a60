-- uses prepared.lua
-- Prepare a batch of fires ahead of their moment: for each schedule, compare
-- its cursor with the slot the leader planned from, write its jobs' hashes
-- (status 'scheduled', on no queue yet), add them to the prepared set that
-- release.lua empties at each moment (and to the schedule's prepared index),
-- and move the schedule to its next slot. Claiming the slot here, under the
-- lease, is what makes a fire happen once: whichever leader releases it
-- later, it is released once.
--
-- A schedule's cursor moves last, once all its jobs are written: a write that
-- fails leaves the slot unclaimed, to be prepared again.
--
-- KEYS[1] lease key, KEYS[2] due sorted set, KEYS[3] prepared sorted set.
-- ARGV: lease value, rq job key prefix, created_at stamp, misfire grace ms,
--   shape count, then per shape (what every job of one template on one site
--   shares): queue key, field count, fields...
--   then item count, then per item:
--     due member, state key, counters key,
--     expected cursor, next cursor ('' = finished), next fire_at ms,
--     overlap skip ('1'/'0'), skipped count, expired count, task name,
--     its concurrency limit ('0' = none), job count,
--     then per job: slot ms, fire_at ms, job id, shape number (1-based),
--     description, data
-- Returns {'not_leader'} or {now_ms, item results...}; an item result is
-- 'stale' (its cursor moved: someone else fired or edited it), 'corrupt' (its
-- state held a wrong value: moved aside, to be rebuilt from its row),
-- 'failed: <error>' (a write was refused; nothing of it stays), or a list of
-- job outcomes, 'prepared' or 'duplicate' (its job id exists already).
-- (pcall: a lease key of another type is not our lease)
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, stamp, grace = ARGV[2], ARGV[3], tonumber(ARGV[4])

-- One HSET command per shape, reused for each of its jobs: slots 2, 8 and 10
-- take the job key, description and data.
local shapes = {}
local i = 6
for s = 1, tonumber(ARGV[5]) do
	local field_count = tonumber(ARGV[i + 1])
	local hset = {'HSET', false, 'created_at', stamp, 'status', 'scheduled', 'description', false, 'data', false}
	for f = i + 2, i + 1 + field_count * 2 do
		hset[#hset + 1] = ARGV[f]
	end
	shapes[s] = {queue = ARGV[i], hset = hset}
	i = i + 2 + field_count * 2
end

-- Undo one item's written jobs: its slot stays unclaimed.
local function unwrite(index, written)
	for _, job in ipairs(written) do
		try('ZREM', KEYS[3], job[2])
		try('ZREM', index, job[2])
		try('DEL', job[1])
	end
end

local results = {now_ms}
local item_count = tonumber(ARGV[i])
i = i + 1
for _ = 1, item_count do
	local member, state_key, counters_key = ARGV[i], ARGV[i + 1], ARGV[i + 2]
	local expected, next_cursor, next_fire_at = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
	local overlap, skipped, expired = ARGV[i + 6], tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
	-- A limited Task's name and limit go last in its members, for release.lua (prepared.lua).
	local limited = ARGV[i + 10] ~= '0' and '\t' .. ARGV[i + 9] .. '\t' .. ARGV[i + 10] or nil
	local job_count = tonumber(ARGV[i + 11])
	local index = index_key(member)
	i = i + 12
	local cursor, err = try('HGET', state_key, 'cursor')
	if err then
		move_aside(state_key, err, now_ms)
		resync(member)
		try('ZREM', KEYS[2], member)
		i = i + job_count * 6
		results[#results + 1] = 'corrupt'
	elseif cursor ~= expected then
		i = i + job_count * 6
		results[#results + 1] = 'stale'
	else
		try('ZREMRANGEBYSCORE', index, '-inf', now_ms - grace - 1)
		local outcomes, written, failed = {}, {}, nil
		for _ = 1, job_count do
			local slot_ms, fire_at_ms, job_id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
			local shape = shapes[tonumber(ARGV[i + 3])]
			local job_key = prefix .. job_id
			if failed then
				outcomes[#outcomes + 1] = 'failed'
			elseif redis.call('EXISTS', job_key) == 1 then
				outcomes[#outcomes + 1] = 'duplicate'
				count(counters_key, 'duplicate', 1, now_ms)
			else
				local hset = shape.hset
				hset[2], hset[8], hset[10] = job_key, ARGV[i + 4], ARGV[i + 5]
				-- The member carries all release.lua needs, in prepared.lua's order.
				local entry = table.concat({job_id, shape.queue, state_key, counters_key, member, slot_ms, fire_at_ms, overlap, now_ms}, '\t')
				if limited then
					entry = entry .. limited
				end
				local _, e1 = try(unpack(hset))
				local _, e2 = try('ZADD', KEYS[3], fire_at_ms, entry)
				local _, e3 = try('ZADD', index, math.max(tonumber(fire_at_ms), now_ms), entry)
				written[#written + 1] = {job_key, entry}
				failed = e1 or e2 or e3
				outcomes[#outcomes + 1] = failed and 'failed' or 'prepared'
			end
			i = i + 6
		end
		if failed then
			unwrite(index, written)
			if string.find(failed, 'WRONGTYPE', 1, true) then
				-- The prepared set or the index held a wrong value; the next round finds them sound.
				for _, key in ipairs({KEYS[3], index}) do
					local kind = try('TYPE', key)
					if kind and kind.ok ~= 'zset' and kind.ok ~= 'none' then
						move_aside(key, failed, now_ms)
					end
				end
			end
			results[#results + 1] = 'failed: ' .. failed
		else
			local _, e = try('HSET', state_key, 'cursor', next_cursor, 'fire_at', next_fire_at, 'finished', next_cursor == '' and '1' or '0')
			if e then
				unwrite(index, written)
				results[#results + 1] = 'failed: ' .. e
			else
				if next_cursor == '' then
					try('ZREM', KEYS[2], member)
				else
					try('ZADD', KEYS[2], next_fire_at, member)
				end
				if #written > 0 then
					count(state_key, 'runs', #written, now_ms)
				end
				if skipped > 0 then
					count(counters_key, 'skipped_missed', skipped, now_ms)
					count(state_key, 'skipped_missed', skipped, now_ms)
				end
				if expired > 0 then
					count(counters_key, 'expired', expired, now_ms)
					count(state_key, 'expired', expired, now_ms)
				end
				results[#results + 1] = outcomes
			end
		end
	end
end

return results

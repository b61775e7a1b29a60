-- Prepare a batch of fires ahead of their moment: for each schedule, compare
-- its cursor with the slot the leader planned from, write its jobs' hashes
-- (status 'scheduled', on no queue yet), add them to the prepared set that
-- release.lua empties at each moment, and move the schedule to its next
-- slot. Claiming the slot here, under the lease, is what makes a fire happen
-- once: whichever leader releases it later, it is released once.
--
-- KEYS[1] lease key, KEYS[2] due sorted set, KEYS[3] prepared sorted set.
-- ARGV: lease value, rq job key prefix, created_at stamp,
--   shape count, then per shape (what every job of one template on one site
--   shares): queue key, field count, fields...
--   then item count, then per item:
--     due member, state key, counters key,
--     expected cursor, next cursor ('' = finished), next fire_at ms,
--     overlap skip ('1'/'0'), skipped count, expired count, job count,
--     then per job: slot ms, fire_at ms, job id, shape number (1-based),
--     description, data
-- Returns {'not_leader'} or {now_ms, item results...}; an item result is
-- 'stale' (its cursor moved: someone else fired or edited it) or a list of
-- job outcomes, 'prepared' or 'duplicate' (its job id exists already).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, stamp = ARGV[2], ARGV[3]

-- One HSET command per shape, reused for each of its jobs: slots 2, 8 and 10
-- take the job key, description and data.
local shapes = {}
local i = 5
for s = 1, tonumber(ARGV[4]) do
	local field_count = tonumber(ARGV[i + 1])
	local hset = {'HSET', false, 'created_at', stamp, 'status', 'scheduled', 'description', false, 'data', false}
	for f = i + 2, i + 1 + field_count * 2 do
		hset[#hset + 1] = ARGV[f]
	end
	shapes[s] = {queue = ARGV[i], hset = hset}
	i = i + 2 + field_count * 2
end

local results = {now_ms}
local item_count = tonumber(ARGV[i])
i = i + 1
for _ = 1, item_count do
	local member, state_key, counters_key = ARGV[i], ARGV[i + 1], ARGV[i + 2]
	local expected, next_cursor, next_fire_at = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
	local overlap, skipped, expired = ARGV[i + 6], tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
	local job_count = tonumber(ARGV[i + 9])
	i = i + 10
	if redis.call('HGET', state_key, 'cursor') ~= expected then
		i = i + job_count * 6
		results[#results + 1] = 'stale'
	else
		local outcomes = {}
		local prepared = 0
		for _ = 1, job_count do
			local slot_ms, fire_at_ms, job_id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
			local shape = shapes[tonumber(ARGV[i + 3])]
			local job_key = prefix .. job_id
			if redis.call('EXISTS', job_key) == 1 then
				outcomes[#outcomes + 1] = 'duplicate'
				redis.call('HINCRBY', counters_key, 'duplicate', 1)
			else
				local hset = shape.hset
				hset[2], hset[8], hset[10] = job_key, ARGV[i + 4], ARGV[i + 5]
				redis.call(unpack(hset))
				-- The member carries all release.lua needs, in prepared.lua's order.
				local entry = table.concat({job_id, shape.queue, state_key, counters_key, member, slot_ms, fire_at_ms, overlap, now_ms}, '\t')
				redis.call('ZADD', KEYS[3], fire_at_ms, entry)
				prepared = prepared + 1
				outcomes[#outcomes + 1] = 'prepared'
			end
			i = i + 6
		end
		local update = {'HSET', state_key, 'cursor', next_cursor, 'fire_at', next_fire_at}
		if next_cursor == '' then
			update[#update + 1] = 'finished'
			update[#update + 1] = '1'
			redis.call('ZREM', KEYS[2], member)
		else
			redis.call('ZADD', KEYS[2], next_fire_at, member)
		end
		redis.call(unpack(update))
		if prepared > 0 then
			redis.call('HINCRBY', state_key, 'runs', prepared)
		end
		if skipped > 0 then
			redis.call('HINCRBY', counters_key, 'skipped_missed', skipped)
			redis.call('HINCRBY', state_key, 'skipped_missed', skipped)
		end
		if expired > 0 then
			redis.call('HINCRBY', counters_key, 'expired', expired)
			redis.call('HINCRBY', state_key, 'expired', expired)
		end
		results[#results + 1] = outcomes
	end
end

return results

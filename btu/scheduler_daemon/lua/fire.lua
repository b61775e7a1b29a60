-- Fire a batch of schedules atomically: for each schedule, compare its cursor
-- with the slot the leader planned from, write and push its jobs, move it to
-- its next slot. Nothing happens unless the caller still holds the lease.
--
-- KEYS[1] lease key, KEYS[2] due sorted set, KEYS[3] rq's set of queues.
-- ARGV: lease value, recent-fires cap, rq job key prefix, time stamp (the
--   jobs' created_at and enqueued_at), shape count, then per shape (what
--   every job of one template on one site shares):
--     queue key, field count, fields...
--   then item count, then per item:
--     member, state key, recent-fires key, counters key, expected cursor,
--     next cursor ('' = finished), next fire_at ms, overlap skip ('1'/'0'),
--     skipped count, expired count, job count, then per job:
--       slot ms, fire_at ms, job id, shape number (1-based), description, data
-- Returns {'not_leader'} or {now_ms, item results...}; an item result is
-- 'stale' (its cursor moved: someone else fired or edited it) or a list of
-- job outcomes: 'enqueued', 'duplicate' or 'skipped_overlap', each followed
-- by its lag in ms.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap, prefix, stamp = tonumber(ARGV[2]), ARGV[3], ARGV[4]

-- One HSET command per shape, reused for each of its jobs: slots 2, 8 and 10
-- take the job key, description and data.
local shapes = {}
local i = 6
for s = 1, tonumber(ARGV[5]) do
	local field_count = tonumber(ARGV[i + 1])
	local hset = {'HSET', false, 'created_at', stamp, 'enqueued_at', stamp, 'description', false, 'data', false}
	for f = i + 2, i + 1 + field_count * 2 do
		hset[#hset + 1] = ARGV[f]
	end
	shapes[s] = {queue = ARGV[i], hset = hset, announced = false}
	i = i + 2 + field_count * 2
end

local counters, fires, fire_keys = {}, {}, {}
local function count(key, outcome, n)
	local c = counters[key]
	if not c then
		c = {}
		counters[key] = c
	end
	c[outcome] = (c[outcome] or 0) + n
end

local results = {now_ms}
local item_count = tonumber(ARGV[i])
i = i + 1
for _ = 1, item_count do
	local member, state_key, fires_key, counters_key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
	local expected, next_cursor, next_fire_at = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
	local overlap_skip, skipped, expired = ARGV[i + 7] == '1', tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9])
	local job_count = tonumber(ARGV[i + 10])
	i = i + 11
	if redis.call('HGET', state_key, 'cursor') ~= expected then
		i = i + job_count * 6
		results[#results + 1] = 'stale'
	else
		local schedule = string.sub(member, string.find(member, '|', 1, true) + 1)
		local last_job = false
		if overlap_skip then
			last_job = redis.call('HGET', state_key, 'last_job_id')
		end
		local recent = fires[fires_key]
		if not recent then
			recent = {}
			fires[fires_key] = recent
			fire_keys[#fire_keys + 1] = fires_key
		end
		local outcomes = {}
		local fired = 0
		local last_slot = false
		for _ = 1, job_count do
			local slot_ms, fire_at_ms, job_id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
			local shape = shapes[tonumber(ARGV[i + 3])]
			local job_key = prefix .. job_id
			local outcome = false
			if overlap_skip and last_job then
				local status = redis.call('HGET', prefix .. last_job, 'status')
				if status == 'queued' or status == 'started' then
					outcome = 'skipped_overlap'
				end
			end
			if not outcome then
				if redis.call('EXISTS', job_key) == 1 then
					outcome = 'duplicate'
				else
					local hset = shape.hset
					hset[2], hset[8], hset[10] = job_key, ARGV[i + 4], ARGV[i + 5]
					redis.call(unpack(hset))
					if not shape.announced then
						redis.call('SADD', KEYS[3], shape.queue)
						shape.announced = true
					end
					redis.call('RPUSH', shape.queue, job_id)
					last_job = job_id
					fired = fired + 1
					outcome = 'enqueued'
				end
			end
			i = i + 6
			local lag = now_ms - tonumber(fire_at_ms)
			last_slot = slot_ms
			count(counters_key, outcome, 1)
			recent[#recent + 1] = {schedule, slot_ms, lag, job_id, outcome}
			outcomes[#outcomes + 1] = outcome
			outcomes[#outcomes + 1] = lag
		end
		local update = {'HSET', state_key, 'cursor', next_cursor, 'fire_at', next_fire_at, 'last_run_ms', now_ms}
		if fired > 0 then
			update[#update + 1] = 'last_job_id'
			update[#update + 1] = last_job
		end
		if last_slot then
			update[#update + 1] = 'last_slot_ms'
			update[#update + 1] = last_slot
		end
		if next_cursor == '' then
			update[#update + 1] = 'finished'
			update[#update + 1] = '1'
			redis.call('ZREM', KEYS[2], member)
		else
			redis.call('ZADD', KEYS[2], next_fire_at, member)
		end
		redis.call(unpack(update))
		if fired > 0 then
			redis.call('HINCRBY', state_key, 'runs', fired)
		end
		if skipped > 0 then
			count(counters_key, 'skipped_missed', skipped)
			redis.call('HINCRBY', state_key, 'skipped_missed', skipped)
		end
		if expired > 0 then
			count(counters_key, 'expired', expired)
			redis.call('HINCRBY', state_key, 'expired', expired)
		end
		results[#results + 1] = outcomes
	end
end

-- Per site, once per batch: the counters, and the newest `cap` fires.
for key, c in pairs(counters) do
	for outcome, n in pairs(c) do
		redis.call('HINCRBY', key, outcome, n)
	end
end
for _, key in ipairs(fire_keys) do
	local recent = fires[key]
	if #recent > 0 then
		local push = {'LPUSH', key}
		for r = math.max(1, #recent - cap + 1), #recent do
			local f = recent[r]
			push[#push + 1] = cjson.encode({
				schedule = f[1], slot_ms = tonumber(f[2]), enqueued_ms = now_ms, lag_ms = f[3], job_id = f[4], outcome = f[5],
			})
		end
		redis.call(unpack(push))
		redis.call('LTRIM', key, 0, cap - 1)
	end
end
return results

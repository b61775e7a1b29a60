-- Fire a batch of schedules atomically: for each schedule, compare its cursor
-- with the slot the leader planned from, write and push its jobs, move it to
-- its next slot. Nothing happens unless the caller still holds the lease.
--
-- KEYS[1] lease key, KEYS[2] due sorted set, KEYS[3] rq's set of queues.
-- ARGV: lease value, recent-fires cap, item count, then per item:
--   member, state key, recent-fires key, counters key, expected cursor,
--   next cursor ('' = finished), next fire_at ms, overlap skip ('1'/'0'),
--   skipped count, expired count, job count, then per job:
--     slot ms, fire_at ms, job id, job key, queue key, field count, fields...
-- Returns {'not_leader'} or {now_ms, item results...}; an item result is
-- 'stale' (its cursor moved: someone else fired or edited it) or a list of
-- job outcomes: 'enqueued', 'duplicate' or 'skipped_overlap', each followed
-- by its lag in ms.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[2])
local results = {now_ms}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
	local member, state_key, fires_key, counters_key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
	local expected, next_cursor, next_fire_at = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
	local overlap_skip, skipped, expired = ARGV[i + 7] == '1', tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9])
	local job_count = tonumber(ARGV[i + 10])
	i = i + 11
	local fresh = redis.call('HGET', state_key, 'cursor') == expected
	local schedule = string.sub(member, string.find(member, '|', 1, true) + 1)
	local last_job = redis.call('HGET', state_key, 'last_job_id')
	local outcomes = {}
	local fired = 0
	local last_slot = false
	for _ = 1, job_count do
		local slot_ms, fire_at_ms, job_id, job_key, queue_key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
		local field_count = tonumber(ARGV[i + 5])
		local first_field = i + 6
		i = first_field + field_count * 2
		if fresh then
			local outcome = false
			if overlap_skip and last_job then
				local status = redis.call('HGET', 'rq:job:' .. last_job, 'status')
				if status == 'queued' or status == 'started' then
					outcome = 'skipped_overlap'
				end
			end
			if not outcome then
				if redis.call('EXISTS', job_key) == 1 then
					outcome = 'duplicate'
				else
					local hset = {'HSET', job_key}
					for f = first_field, first_field + field_count * 2 - 1 do
						hset[#hset + 1] = ARGV[f]
					end
					redis.call(unpack(hset))
					redis.call('SADD', KEYS[3], queue_key)
					redis.call('RPUSH', queue_key, job_id)
					last_job = job_id
					fired = fired + 1
					outcome = 'enqueued'
				end
			end
			local lag = now_ms - tonumber(fire_at_ms)
			last_slot = slot_ms
			redis.call('HINCRBY', counters_key, outcome, 1)
			redis.call('LPUSH', fires_key, cjson.encode({
				schedule = schedule, slot_ms = tonumber(slot_ms), enqueued_ms = now_ms,
				lag_ms = lag, job_id = job_id, outcome = outcome,
			}))
			outcomes[#outcomes + 1] = outcome
			outcomes[#outcomes + 1] = lag
		end
	end
	if fresh then
		local update = {'HSET', state_key, 'cursor', next_cursor, 'fire_at', next_fire_at, 'last_run_ms', now_ms}
		if last_job then
			update[#update + 1] = 'last_job_id'
			update[#update + 1] = last_job
		end
		if last_slot then
			update[#update + 1] = 'last_slot_ms'
			update[#update + 1] = last_slot
		end
		redis.call(unpack(update))
		if fired > 0 then
			redis.call('HINCRBY', state_key, 'runs', fired)
		end
		if skipped > 0 then
			redis.call('HINCRBY', counters_key, 'skipped_missed', skipped)
			redis.call('HINCRBY', state_key, 'skipped_missed', skipped)
		end
		if expired > 0 then
			redis.call('HINCRBY', counters_key, 'expired', expired)
			redis.call('HINCRBY', state_key, 'expired', expired)
		end
		if next_cursor == '' then
			redis.call('ZREM', KEYS[2], member)
			redis.call('HSET', state_key, 'finished', '1')
		else
			redis.call('ZADD', KEYS[2], next_fire_at, member)
		end
		if job_count > 0 then
			redis.call('LTRIM', fires_key, 0, cap - 1)
		end
		results[#results + 1] = outcomes
	else
		results[#results + 1] = 'stale'
	end
end
return results

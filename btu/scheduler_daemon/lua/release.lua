-- uses prepared.lua
-- Release the prepared fires whose moment has come: stamp each job's
-- enqueued_at, set it queued and push it on its queue, so a worker takes it,
-- unless, under the overlap policy 'skip', the schedule's previous job is
-- still queued or started ('skipped_overlap'). A released entry leaves the
-- prepared set in the same step, so it is released once whichever leader
-- does it. (A schedule paused, edited or removed meanwhile had its prepared
-- fires withdrawn by upsert.lua or remove.lua.)
--
-- An entry released more than the misfire grace after its moment, or after
-- it was prepared when that was later (no leader was up meanwhile), is
-- 'returned': withdrawn with every other fire prepared for its schedule, and
-- the schedule's cursor moved back to its slot, so the schedule's catch-up
-- policy decides, as for any missed slot.
--
-- KEYS[1] lease key, KEYS[2] prepared sorted set, KEYS[3] rq's set of
-- queues, KEYS[4] due sorted set.
-- ARGV: lease value, batch size, rq job key prefix, grace ms.
-- Returns {'not_leader'} or, per entry: member, outcome ('enqueued',
-- 'skipped_overlap' or 'returned'), lag ms.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local seconds, micros = tonumber(t[1]), tonumber(t[2])
local now_ms = seconds * 1000 + math.floor(micros / 1000)
local prefix, grace = ARGV[3], tonumber(ARGV[4])

-- enqueued_at as rq writes it (rq.utils.utcformat): the civil date of the
-- day count (H. Hinnant's days_from_civil, inverted).
local function rq_time()
	local days = math.floor(seconds / 86400)
	local rest = seconds - days * 86400
	local z = days + 719468
	local era = math.floor(z / 146097)
	local doe = z - era * 146097
	local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
	local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
	local mp = math.floor((5 * doy + 2) / 153)
	local day = doy - math.floor((153 * mp + 2) / 5) + 1
	local month = mp < 10 and mp + 3 or mp - 9
	local year = yoe + era * 400 + (month <= 2 and 1 or 0)
	return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%06dZ', year, month, day,
		math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60, micros)
end
local stamp = rq_time()

-- The due entries are the first by rank: removed by rank, not member by member.
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[2]))
if #due > 0 then
	redis.call('ZREMRANGEBYRANK', KEYS[2], 0, #due - 1)
end

local results = {}
local queues, queue_order = {}, {}
local counts = {}
local returned, returned_any = {}, false
local n = 0
for _, member in ipairs(due) do
	local job_id, queue, state_key, counters_key, due_member, slot, fire_at, overlap, prepared_ms = prepared_fields(member)
	fire_at = tonumber(fire_at)
	local job_key = prefix .. job_id
	local outcome = 'enqueued'
	if returned[state_key] or now_ms - math.max(fire_at, tonumber(prepared_ms)) > grace then
		outcome = 'returned'
		redis.call('DEL', job_key)
		local cursor = redis.call('HGET', state_key, 'cursor')
		if cursor then
			redis.call('HINCRBY', state_key, 'runs', -1)
			if not returned[state_key] and (cursor == '' or tonumber(slot) < tonumber(cursor)) then
				redis.call('HSET', state_key, 'cursor', slot, 'fire_at', fire_at, 'finished', '0')
				redis.call('ZADD', KEYS[4], fire_at, due_member)
			end
		end
		returned[state_key] = true
		returned_any = true
	elseif overlap == '1' then
		local last = redis.call('HGET', state_key, 'last_job_id')
		local previous = last and redis.call('HGET', prefix .. last, 'status')
		if previous == 'queued' or previous == 'started' then
			outcome = 'skipped_overlap'
			redis.call('DEL', job_key)
			redis.call('HINCRBY', state_key, 'runs', -1)
		else
			redis.call('HSET', state_key, 'last_job_id', job_id)
		end
	end
	if outcome == 'enqueued' then
		redis.call('HSET', job_key, 'status', 'queued', 'enqueued_at', stamp)
		local ids = queues[queue]
		if not ids then
			ids = {}
			queues[queue] = ids
			queue_order[#queue_order + 1] = queue
		end
		ids[#ids + 1] = job_id
	end
	if outcome ~= 'returned' then
		local site = counts[counters_key]
		if not site then
			site = {}
			counts[counters_key] = site
		end
		site[outcome] = (site[outcome] or 0) + 1
	end
	results[n + 1], results[n + 2], results[n + 3] = member, outcome, now_ms - fire_at
	n = n + 3
end

-- A returned schedule's fires prepared for later moments go back with it.
if returned_any then
	for _, member in ipairs(withdraw(KEYS[2], prefix, returned)) do
		results[n + 1], results[n + 2], results[n + 3] = member, 'returned', now_ms - tonumber((select(7, prepared_fields(member))))
		n = n + 3
	end
end

for _, queue in ipairs(queue_order) do
	local ids = queues[queue]
	redis.call('SADD', KEYS[3], queue)
	for c = 1, #ids, 1000 do
		redis.call('RPUSH', queue, unpack(ids, c, math.min(c + 999, #ids)))
	end
end
for counters_key, site in pairs(counts) do
	for outcome, n in pairs(site) do
		redis.call('HINCRBY', counters_key, outcome, n)
	end
end
return results

-- uses prepared.lua
-- Release the prepared fires whose moment has come: stamp each job's
-- enqueued_at, set it queued and push it on its queue, so a worker takes it,
-- unless, under the overlap policy 'skip', the schedule's previous job is
-- still queued or started ('skipped_overlap'), or its Task has a concurrency
-- limit and that many of its jobs are queued or started ('skipped_concurrency':
-- the Task's running set, task_running_key, holds the ids of the jobs this
-- script queued for it; each check drops those no longer queued or started,
-- and a set holding another type or more ids than any limit keeps is moved
-- aside, its jobs no longer counted). A Task's set is checked once per
-- script, then counted on as its fires are queued: nothing else runs meanwhile,
-- so several schedules of one Task in one batch see each other's jobs.
-- A released entry leaves the
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
-- Nothing leaves the prepared set before its job is on its queue or its
-- outcome is recorded: a member that is not one prepare.lua writes, or whose
-- job key holds something else, is 'quarantined' (noted, see guard.lua); the
-- entries of a queue that refuses the push are 'push_refused' (kept for a later
-- round, their jobs back to 'scheduled'); the prepared set loses its entries
-- last, after every push.
--
-- KEYS[1] lease key, KEYS[2] prepared sorted set, KEYS[3] rq's set of
-- queues, KEYS[4] due sorted set.
-- ARGV: lease value, batch size, rq job key prefix, grace ms.
-- Returns {'not_leader'} or, per entry: member, outcome ('enqueued',
-- 'skipped_overlap', 'skipped_concurrency', 'returned', 'quarantined: <why>' or
-- 'push_refused: <why>'), lag ms.
-- (pcall: a lease key of another type is not our lease)
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local seconds, micros = tonumber(t[1]), tonumber(t[2])
local now_ms = seconds * 1000 + math.floor(micros / 1000)
local prefix, grace = ARGV[3], tonumber(ARGV[4])
-- A running set holds at most its Task's limit of ids (limits are at most 100, reconcile.py): one
-- holding more is not one this script kept. It outlives its last release by a week: a job queued or
-- running longer is no longer counted.
local MAX_RUNNING_IDS, RUNNING_TTL_MS = 1000, 7 * 24 * 3600 * 1000

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

local due, wrong = try('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[2]))
if wrong then
	-- The prepared set holds another type: nothing in it can be a fire. Moved aside, and every
	-- schedule rebuilt from its state by the next reconcile.
	move_aside(KEYS[2], wrong, now_ms)
	resync('*')
	return {}
end

local results = {}
local queues, queue_order = {}, {}
local counts = {}
local returned, returned_any = {}, false
local active = {} -- per running set checked: its jobs queued or started, this script's included
local n = 0

local function quarantined(member, reason)
	note(KEYS[2] .. ' member ' .. redis.sha1hex(member), reason, now_ms, member)
	return 'quarantined: ' .. reason
end

-- How many of the ids in a Task's running set are jobs queued or started; the others leave it.
local function running(key)
	local size, err = try('SCARD', key)
	if not err and size > MAX_RUNNING_IDS then
		err = 'holds ' .. size .. ' job ids, more than any concurrency limit keeps'
	end
	if err then
		move_aside(key, err, now_ms)
		return 0
	end
	local found = 0
	for _, id in ipairs(try('SMEMBERS', key) or {}) do
		local status = try('HGET', prefix .. id, 'status')
		if status == 'queued' or status == 'started' then
			found = found + 1
		else
			try('SREM', key, id)
		end
	end
	return found
end

for _, member in ipairs(due) do
	local job_id, queue, state_key, counters_key, due_member, slot, fire_at, overlap, prepared_ms, rest = prepared_fields(member)
	local outcome = 'enqueued'
	local bad = bad_member(job_id, queue, state_key, counters_key, due_member, slot, fire_at, overlap, prepared_ms, rest)
	local running_key
	local job_key = bad == nil and prefix .. job_id
	fire_at = tonumber(fire_at) or now_ms
	if bad then
		outcome = quarantined(member, bad)
	elseif returned[state_key] or now_ms - math.max(fire_at, tonumber(prepared_ms)) > grace then
		outcome = 'returned'
		try('DEL', job_key)
		local cursor, err = try('HGET', state_key, 'cursor')
		if err then
			move_aside(state_key, err, now_ms)
			resync(due_member)
		elseif cursor then
			count(state_key, 'runs', -1, now_ms)
			if not returned[state_key] and (cursor == '' or tonumber(slot) < (tonumber(cursor) or 0)) then
				try('HSET', state_key, 'cursor', slot, 'fire_at', fire_at, 'finished', '0')
				try('ZADD', KEYS[4], fire_at, due_member)
			end
		end
		returned[state_key] = due_member
		returned_any = true
	else
		local last_job = overlap == '1'
		if last_job then
			local last, err = try('HGET', state_key, 'last_job_id')
			local previous = last and try('HGET', prefix .. last, 'status')
			if err then
				move_aside(state_key, err, now_ms)
				resync(due_member)
				last_job = false
			elseif previous == 'queued' or previous == 'started' then
				outcome = 'skipped_overlap'
			end
		end
		if outcome == 'enqueued' and rest ~= '' then
			local task, limit = task_limit(rest)
			running_key = task_running_key(string.match(due_member, '^([^|]+)|'), task)
			active[running_key] = active[running_key] or running(running_key)
			if active[running_key] >= limit then
				outcome = 'skipped_concurrency'
			end
		end
		if outcome ~= 'enqueued' then
			try('DEL', job_key)
			count(state_key, 'runs', -1, now_ms)
		elseif last_job then
			try('HSET', state_key, 'last_job_id', job_id)
		end
	end
	if outcome == 'enqueued' then
		-- A prepared job has a status already: two new fields mean its hash was gone.
		local added, err = try('HSET', job_key, 'status', 'queued', 'enqueued_at', stamp)
		if added == 2 then
			try('DEL', job_key)
			err = 'its job hash is gone'
		end
		if err then
			outcome = quarantined(member, 'job ' .. job_key .. ': ' .. err)
		else
			local ids = queues[queue]
			if not ids then
				ids = {}
				queues[queue] = ids
				queue_order[#queue_order + 1] = queue
			end
			ids[#ids + 1] = job_id
			ids[#ids + 1] = n + 2 -- where its outcome stands in results, should the push fail
			if running_key then
				-- A refused push leaves it 'scheduled': the next check drops it.
				try('SADD', running_key, job_id)
				try('PEXPIRE', running_key, RUNNING_TTL_MS)
				active[running_key] = active[running_key] + 1
			end
		end
	end
	if outcome == 'enqueued' or outcome == 'skipped_overlap' or outcome == 'skipped_concurrency' then
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

-- Push each queue's ids; a queue that refuses keeps its entries prepared.
local push_refused = false
for _, queue in ipairs(queue_order) do
	local entries = queues[queue]
	local ids = {}
	for e = 1, #entries, 2 do
		ids[#ids + 1] = entries[e]
	end
	local err
	for c = 1, #ids, 1000 do
		local _, e = try('RPUSH', queue, unpack(ids, c, math.min(c + 999, #ids)))
		err = err or e
	end
	if err then
		-- Only the first push of a queue can fail (its type or a permission): none of its ids went on.
		push_refused = true
		for e = 1, #entries, 2 do
			try('HSET', prefix .. entries[e], 'status', 'scheduled')
			try('HDEL', prefix .. entries[e], 'enqueued_at')
			local at = entries[e + 1]
			local counters_key = select(4, prepared_fields(results[at - 1]))
			counts[counters_key].enqueued = counts[counters_key].enqueued - 1
			results[at] = 'push_refused: ' .. queue .. ': ' .. err
		end
	else
		try('SADD', KEYS[3], queue)
	end
end

-- Every entry has its outcome: the prepared set lets them go (those whose push was refused stay).
if not push_refused then
	if #due > 0 then
		redis.call('ZREMRANGEBYRANK', KEYS[2], 0, #due - 1)
	end
else
	for r = 1, n, 3 do
		if string.sub(results[r + 1], 1, 13) ~= 'push_refused:' then
			try('ZREM', KEYS[2], results[r])
		end
	end
end

-- A returned schedule's fires prepared for later moments go back with it.
if returned_any then
	for _, due_member in pairs(returned) do
		for _, member in ipairs(withdraw(index_key(due_member), KEYS[2], prefix, now_ms)) do
			results[n + 1], results[n + 2], results[n + 3] = member, 'returned', now_ms - tonumber((select(7, prepared_fields(member))))
			n = n + 3
		end
	end
end

for counters_key, site in pairs(counts) do
	for outcome, c in pairs(site) do
		if c > 0 then
			count(counters_key, outcome, c, now_ms)
		end
	end
end
return results

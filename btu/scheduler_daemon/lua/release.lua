-- Release the prepared fires whose moment has come: push each job on its
-- queue, so a worker takes it, unless its schedule was removed or paused
-- since it was prepared ('cancelled') or, under the overlap policy 'skip',
-- the schedule's previous job is still queued or started ('skipped_overlap').
-- A released entry leaves the prepared set in the same step, so it is
-- released once whichever leader does it.
--
-- An entry released more than the misfire grace after its moment, or after
-- it was prepared when that was later (no leader was up meanwhile), is 'returned': its job is deleted and its schedule's cursor moved
-- back to its slot, with every other fire prepared for that schedule, so the
-- schedule's catch-up policy decides, as for any missed slot.
--
-- KEYS[1] lease key, KEYS[2] prepared sorted set, KEYS[3] rq's set of
-- queues, KEYS[4] due sorted set.
-- ARGV: lease value, batch size, recent-fires cap, rq job key prefix, grace ms.
-- Returns {'not_leader'} or {now_ms, then per entry: member, outcome
-- ('enqueued', 'cancelled', 'skipped_overlap' or 'returned'), lag ms}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return {'not_leader'}
end
local t = redis.call('TIME')
local seconds, micros = tonumber(t[1]), tonumber(t[2])
local now_ms = seconds * 1000 + math.floor(micros / 1000)
local cap, prefix, grace = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])

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

local function fields(entry)
	local out, start = {}, 1
	while true do
		local stop = string.find(entry, '\t', start, true)
		if not stop then
			out[#out + 1] = string.sub(entry, start)
			return out
		end
		out[#out + 1] = string.sub(entry, start, stop - 1)
		start = stop + 1
	end
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[2]))
for c = 1, #due, 1000 do
	redis.call('ZREM', KEYS[2], unpack(due, c, math.min(c + 999, #due)))
end

-- Undo a prepared fire: its job goes, and its run is no longer counted.
local function withdraw(job_key, state_key, exists)
	redis.call('DEL', job_key)
	if exists then
		redis.call('HINCRBY', state_key, 'runs', -1)
	end
end

local results = {now_ms}
local queues, queue_order = {}, {}
local sites, site_order = {}, {}
local returned = {}
for _, member in ipairs(due) do
	-- job id, queue key, state key, fires key, counters key, due member, slot ms, fire_at ms, overlap, prepared ms
	local f = fields(member)
	local job_id, state_key, slot, fire_at = f[1], f[3], tonumber(f[7]), tonumber(f[8])
	local late = now_ms - math.max(fire_at, tonumber(f[10]))
	local job_key = prefix .. job_id
	local state = redis.call('HMGET', state_key, 'cursor', 'paused', 'last_job_id')
	local outcome = false
	if not state[1] or state[2] == '1' then
		outcome = 'cancelled'
	elseif returned[state_key] or late > grace then
		outcome = 'returned'
		if not returned[state_key] then
			returned[state_key] = true
			returned[#returned + 1] = state_key
			if state[1] == '' or slot < tonumber(state[1]) then
				redis.call('HSET', state_key, 'cursor', slot, 'fire_at', fire_at, 'finished', '0')
				redis.call('ZADD', KEYS[4], fire_at, f[6])
			end
		end
	elseif f[9] == '1' and state[3] then
		local previous = redis.call('HGET', prefix .. state[3], 'status')
		if previous == 'queued' or previous == 'started' then
			outcome = 'skipped_overlap'
		end
	end
	if outcome then
		withdraw(job_key, state_key, state[1])
	else
		outcome = 'enqueued'
		redis.call('HSET', job_key, 'status', 'queued', 'enqueued_at', stamp)
		redis.call('HSET', state_key, 'last_job_id', job_id, 'last_run_ms', now_ms, 'last_slot_ms', f[7])
		local ids = queues[f[2]]
		if not ids then
			ids = {}
			queues[f[2]] = ids
			queue_order[#queue_order + 1] = f[2]
		end
		ids[#ids + 1] = job_id
	end
	local lag = now_ms - fire_at
	if outcome ~= 'returned' then
		local site = sites[f[4]]
		if not site then
			site = {counters_key = f[5], counts = {}, fires = {}}
			sites[f[4]] = site
			site_order[#site_order + 1] = f[4]
		end
		site.counts[outcome] = (site.counts[outcome] or 0) + 1
		local schedule = string.sub(f[6], string.find(f[6], '|', 1, true) + 1)
		site.fires[#site.fires + 1] = {schedule, f[7], lag, job_id, outcome}
	end
	results[#results + 1] = member
	results[#results + 1] = outcome
	results[#results + 1] = lag
end

-- A returned schedule's fires prepared for later moments go back with it.
if #returned > 0 then
	for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
		local f = fields(member)
		if returned[f[3]] then
			redis.call('ZREM', KEYS[2], member)
			withdraw(prefix .. f[1], f[3], true)
			results[#results + 1] = member
			results[#results + 1] = 'returned'
			results[#results + 1] = now_ms - tonumber(f[8])
		end
	end
end

for _, queue in ipairs(queue_order) do
	local ids = queues[queue]
	redis.call('SADD', KEYS[3], queue)
	for c = 1, #ids, 1000 do
		redis.call('RPUSH', queue, unpack(ids, c, math.min(c + 999, #ids)))
	end
end

-- Per site, once per batch: the counters, and the newest `cap` fires.
for _, fires_key in ipairs(site_order) do
	local site = sites[fires_key]
	for outcome, n in pairs(site.counts) do
		redis.call('HINCRBY', site.counters_key, outcome, n)
	end
	local push = {'LPUSH', fires_key}
	for r = math.max(1, #site.fires - cap + 1), #site.fires do
		local f = site.fires[r]
		push[#push + 1] = cjson.encode({
			schedule = f[1], slot_ms = tonumber(f[2]), enqueued_ms = now_ms, lag_ms = f[3], job_id = f[4], outcome = f[5],
		})
	end
	redis.call(unpack(push))
	redis.call('LTRIM', fires_key, 0, cap - 1)
end
return results

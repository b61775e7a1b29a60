-- uses guard.lua
-- The prepared set's members, shared by the scripts that read them.
-- A member: job id, queue key, state key, counters key, due member, slot ms,
-- fire_at ms, overlap skip ('1'/'0'), prepared ms, and for a Task with a
-- concurrency limit two more: its name and the limit; tab-separated
-- (state.Prepared). A Task without a limit adds none, so its members read the
-- same to a scheduler of the version before limits.
-- One match returning the nine fields and the rest, not a loop building a table:
-- release.lua parses every member it queues.
local PREPARED_FIELDS = '^' .. string.rep('([^\t]*)\t', 8) .. '([^\t]*)(.*)$'
local function prepared_fields(member)
	return string.match(member, PREPARED_FIELDS)
end

-- The Task and its concurrency limit in the rest of a member (after its ninth field), or nil.
local function task_limit(rest)
	local task, limit = string.match(rest, '^\t([^\t]+)\t([1-9]%d*)$')
	return task, tonumber(limit)
end

-- Per schedule, the index of its prepared members (score: the moment after
-- which release returns them), so that withdrawing touches only its own.
local function index_key(due_member)
	local site, schedule = string.match(due_member, '^([^|]*)|(.*)$')
	return site and prepared_index_key(site, schedule)
end

-- Digits only, as prepare.lua writes them: tonumber also takes '1e3', '0x10' and ' 5', which the
-- scheduler's own parser (state.Prepared) refuses, and a member both do not read alike must not pass.
local function is_digits(text)
	return string.match(text, '^%d+$') ~= nil
end

-- Why a member cannot be one prepare.lua wrote, or nil. A member that passes
-- names only keys of its own schedule and its site, and an rq queue.
local function bad_member(job_id, queue, state_key, counters, due_member, slot, fire_at, overlap, prepared_ms, rest)
	if not prepared_ms then
		return 'not nine tab-separated fields'
	end
	if rest ~= '' and not task_limit(rest) then
		return 'the fields after the ninth are not a task and a limit of 1 or more'
	end
	local site, schedule = string.match(due_member, '^([^|]+)|(.+)$')
	if not site then
		return 'due member is not <site>|<schedule>'
	elseif job_id == '' then
		return 'empty job id'
	elseif string.sub(queue, 1, #RQ_QUEUE_PREFIX) ~= RQ_QUEUE_PREFIX then
		return 'queue key is not an rq queue'
	elseif state_key ~= schedule_key(site, schedule) or counters ~= counters_key(site) then
		return 'state or counters key is not its schedule\'s'
	elseif not (is_digits(slot) and is_digits(fire_at) and is_digits(prepared_ms)) or (overlap ~= '0' and overlap ~= '1') then
		return 'a number field is not digits'
	end
	return nil
end

-- Withdraw every fire still prepared for one schedule: the entry and its job
-- go, and its run is uncounted. Returns the withdrawn members.
local function withdraw(index, prepared_key, job_prefix, now_ms)
	local out = {}
	local members, err = try('ZRANGE', index, 0, -1)
	if err then
		move_aside(index, err, now_ms)
		return out
	end
	for _, member in ipairs(members) do
		local job_id, queue, state_key, counters_key, due_member, slot, fire_at, overlap, prepared_ms, rest = prepared_fields(member)
		-- Only a member of this schedule: the index is state too, and may hold anything.
		if job_id and not bad_member(job_id, queue, state_key, counters_key, due_member, slot, fire_at, overlap, prepared_ms, rest)
			and index_key(due_member) == index and try('ZREM', prepared_key, member) == 1 then
			try('DEL', job_prefix .. job_id)
			if try('EXISTS', state_key) == 1 then
				count(state_key, 'runs', -1, now_ms)
			end
			out[#out + 1] = member
		end
	end
	try('DEL', index)
	return out
end

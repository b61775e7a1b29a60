-- The prepared set's members, shared by the scripts that read them (scripts.py
-- puts this file before those that say "-- uses prepared.lua").
-- A member: job id, queue key, state key, counters key, due member, slot ms,
-- fire_at ms, overlap skip ('1'/'0'), prepared ms; tab-separated (state.Prepared).
-- One match returning the nine fields, not a loop building a table: release.lua
-- parses every member it queues.
local PREPARED_FIELDS = '^' .. string.rep('([^\t]*)\t', 8) .. '([^\t]*)$'
local function prepared_fields(member)
	return string.match(member, PREPARED_FIELDS)
end

-- Withdraw every fire prepared for the schedules whose state keys are in the
-- set `state_keys`: the entry and its job go, and its run is uncounted.
-- Returns the withdrawn members.
local function withdraw(prepared_key, job_prefix, state_keys)
	local out = {}
	if redis.call('ZCARD', prepared_key) == 0 then
		return out
	end
	for _, member in ipairs(redis.call('ZRANGE', prepared_key, 0, -1)) do
		local job_id, _, state_key = prepared_fields(member)
		if state_keys[state_key] then
			redis.call('ZREM', prepared_key, member)
			redis.call('DEL', job_prefix .. job_id)
			if redis.call('EXISTS', state_key) == 1 then
				redis.call('HINCRBY', state_key, 'runs', -1)
			end
			out[#out + 1] = member
		end
	end
	return out
end


-- The prepared set's members, shared by the scripts that read them (scripts.py
-- puts this file before those that say "-- uses prepared.lua").
-- A member: job id, queue key, state key, counters key, due member, slot ms,
-- fire_at ms, overlap skip ('1'/'0'), prepared ms; tab-separated (state.Prepared).
local function prepared_fields(member)
	local out, start = {}, 1
	while true do
		local stop = string.find(member, '\t', start, true)
		if not stop then
			out[#out + 1] = string.sub(member, start)
			return out
		end
		out[#out + 1] = string.sub(member, start, stop - 1)
		start = stop + 1
	end
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
		local f = prepared_fields(member)
		if state_keys[f[3]] then
			redis.call('ZREM', prepared_key, member)
			redis.call('DEL', job_prefix .. f[1])
			if redis.call('EXISTS', f[3]) == 1 then
				redis.call('HINCRBY', f[3], 'runs', -1)
			end
			out[#out + 1] = member
		end
	end
	return out
end


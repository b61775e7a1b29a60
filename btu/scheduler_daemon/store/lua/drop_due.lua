-- uses guard.lua
-- Take schedules off the due set that the leader found removed or impossible
-- to plan, unless they changed since it read them: a schedule restored or
-- edited meanwhile (a new fingerprint, or a state where there was none) keeps
-- the entry its upsert wrote.
-- KEYS[1] the due sorted set; ARGV: pairs of due member and the fingerprint
-- read ('' for a schedule that had no state). Returns how many were dropped.
local dropped = 0
for i = 1, #ARGV, 2 do
	local member, seen = ARGV[i], ARGV[i + 1]
	local site, schedule = string.match(member, '^([^|]+)|(.+)$')
	if site then
		local now, err = try('HGET', schedule_key(site, schedule), 'fingerprint')
		if not err and (now or '') == seen and try('ZREM', KEYS[1], member) == 1 then
			dropped = dropped + 1
		end
	end
end
return dropped

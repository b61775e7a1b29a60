-- uses guard.lua
-- Add fire records to a site's recent fires, newest first, keeping the newest few, unless the site
-- has left the state meanwhile (State.purge_site takes it out of the sites set before deleting its
-- keys, so a record that comes late cannot bring its list back).
-- KEYS[1] the sites set, KEYS[2] the site's recent fires. ARGV: site, how many to keep, records (oldest first).
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if try('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
	return 0
end
local records = {unpack(ARGV, 3)}
local _, err = try('LPUSH', KEYS[2], unpack(records))
if err then
	move_aside(KEYS[2], err, now_ms)
	try('LPUSH', KEYS[2], unpack(records))
end
try('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
return 1

-- What every script that writes shares (scripts.py puts this file before those
-- that say "-- uses guard.lua"): writes that report a wrong value instead of
-- failing the script, and the quarantine that moves a wrong value aside.
--
-- A server-wide refusal (out of memory, a read-only replica, loading) reaches
-- a script at its first write, before it changed anything: the script stops
-- there and the caller backs off. Any other error belongs to one key or one
-- member, which is quarantined so that everything else goes on.
local SERVER_WIDE = {OOM = true, READONLY = true, MASTERDOWN = true, LOADING = true, BUSY = true, NOREPLICAS = true, MISCONF = true}
-- QUARANTINE, QUARANTINED and RESYNC come from the key names scripts.py puts first.
local QUARANTINE_LIMIT, QUARANTINE_TTL_MS = 1000, 7 * 24 * 3600 * 1000

-- redis.pcall, but a server-wide refusal ends the script. Returns the reply, or nil and the error text.
local function try(...)
	local reply = redis.pcall(...)
	if type(reply) == 'table' and reply.err then
		if SERVER_WIDE[string.match(reply.err, '^(%u+)')] then
			error(reply)
		end
		return nil, reply.err
	end
	return reply
end

local function clip(text)
	text = tostring(text)
	return #text > 300 and string.sub(text, 1, 300) .. '...' or text
end

-- Record what was moved aside and why (at most QUARANTINE_LIMIT entries are kept).
local function note(what, reason, now_ms, detail)
	local entry = cjson.encode({reason = clip(reason), at_ms = now_ms, detail = detail and clip(detail) or cjson.null})
	local _, err = try('HSET', QUARANTINE, what, entry)
	if err then
		-- The record itself held a wrong value: it goes aside like any other key.
		try('RENAME', QUARANTINE, QUARANTINED .. QUARANTINE)
		try('HSET', QUARANTINE, what, entry)
	end
	if (try('HLEN', QUARANTINE) or 0) > QUARANTINE_LIMIT then
		try('HDEL', QUARANTINE, what)
	end
end

-- Move a key holding a wrong value to btu:quarantined:<key> (kept a week), and note it.
local function move_aside(key, reason, now_ms)
	local target = QUARANTINED .. key
	if try('RENAME', key, target) then
		try('PEXPIRE', target, QUARANTINE_TTL_MS)
	else
		try('DEL', key)
		target = nil
	end
	note(key, reason, now_ms, target and ('moved to ' .. target) or 'deleted')
end

-- A schedule whose state was wrong: rebuilt from its database row by the next reconcile. A resync set that
-- holds a wrong value goes aside first: the member would be lost with it, and the schedule never rebuilt.
local function resync(due_member)
	local _, err = try('SADD', RESYNC, due_member)
	if err then
		local t = redis.call('TIME')
		move_aside(RESYNC, err, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
		try('SADD', RESYNC, due_member)
	end
end

-- Add to a counter; a wrong value there is noted and the counter starts again.
local function count(key, field, n, now_ms)
	local _, err = try('HINCRBY', key, field, n)
	if err then
		if try('TYPE', key).ok ~= 'hash' then
			move_aside(key, err, now_ms)
		else
			note(key .. ' ' .. field, err, now_ms, try('HGET', key, field))
			try('HSET', key, field, n)
		end
	end
end

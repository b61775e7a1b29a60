-- uses prepared.lua
-- Put one schedule's definition into the state, as the reconcile read it.
-- KEYS[1] state key, KEYS[2] due sorted set, KEYS[3] site's schedule set,
-- KEYS[4] prepared sorted set, KEYS[5] the schedule's prepared index, KEYS[6] its definition (spec and job).
-- ARGV: member, name, spec fingerprint, spec JSON, job JSON, paused ('1'/'0'),
--   site active ('1'/'0'), cursor for a new schedule, its fire_at, cursor
--   from now, its fire_at, row modified, rq job key prefix.
-- The cursor is kept unless the schedule is new, its spec changed, or it is
-- resumed: edits to the task alone never move a pending slot. A changed spec
-- or a pause also withdraws the fires prepared for the schedule, so it takes
-- effect before them. State that holds a wrong value (not a hash, a cursor or
-- fire time that is not a number) is moved aside and built as for a new
-- schedule ('rebuilt').
-- Returns 'new', 'rebuilt', 'changed', 'resumed' or 'same'.
local member, name, fingerprint, spec, job = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local paused, active = ARGV[6], ARGV[7]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result = 'same'
local stored, err = try('HMGET', KEYS[1], 'fingerprint', 'paused', 'cursor', 'fire_at')
if not err and stored[1] and not (string.match(stored[3] or '', '^%d*$') and string.match(stored[4] or '', '^%d+$')) then
	err = 'cursor ' .. tostring(stored[3]) .. ' or fire_at ' .. tostring(stored[4]) .. ' is not a number'
end
if err then
	move_aside(KEYS[1], err, now_ms)
	stored, result = {}, 'rebuilt'
end
local cursor, fire_at = stored[3], stored[4]
if not stored[1] then
	result, cursor, fire_at = result == 'rebuilt' and result or 'new', ARGV[8], ARGV[9]
elseif stored[1] ~= fingerprint then
	result, cursor, fire_at = 'changed', ARGV[10], ARGV[11]
elseif stored[2] == '1' and paused == '0' then
	result, cursor, fire_at = 'resumed', ARGV[10], ARGV[11]
end
if result == 'changed' or (paused == '1' and stored[2] ~= '1') then
	withdraw(KEYS[5], KEYS[4], ARGV[13], now_ms)
end
if result ~= 'same' then
	try('HSET', KEYS[1], 'cursor', cursor, 'fire_at', fire_at, 'finished', cursor == '' and '1' or '0')
end
try('HSET', KEYS[1], 'name', name, 'fingerprint', fingerprint, 'paused', paused, 'modified', ARGV[12])
-- A state written before definitions had their own key held them in the hash: the definition key is read first.
try('HDEL', KEYS[1], 'spec', 'job')
redis.call('SET', KEYS[6], spec .. '\n' .. job)
try('SREM', RESYNC, member)
local _, set_err = try('SADD', KEYS[3], name)
if set_err then
	move_aside(KEYS[3], set_err, now_ms)
	try('SADD', KEYS[3], name)
end
local finished = try('HGET', KEYS[1], 'finished') == '1'
if paused == '0' and active == '1' and not finished and cursor ~= '' then
	try('ZADD', KEYS[2], fire_at, member)
else
	try('ZREM', KEYS[2], member)
end
return result

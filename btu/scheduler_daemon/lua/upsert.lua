-- uses prepared.lua
-- Put one schedule's definition into the state, as the reconcile read it.
-- KEYS[1] state key, KEYS[2] due sorted set, KEYS[3] site's schedule set,
-- KEYS[4] prepared sorted set.
-- ARGV: member, name, spec fingerprint, spec JSON, job JSON, paused ('1'/'0'),
--   site active ('1'/'0'), cursor for a new schedule, its fire_at, cursor
--   from now, its fire_at, row modified, rq job key prefix.
-- The cursor is kept unless the schedule is new, its spec changed, or it is
-- resumed: edits to the task alone never move a pending slot. A changed spec
-- or a pause also withdraws the fires prepared for the schedule, so it takes
-- effect before them.
-- Returns 'new', 'changed', 'resumed' or 'same'.
local member, name, fingerprint, spec, job = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local paused, active = ARGV[6], ARGV[7]
local stored = redis.call('HMGET', KEYS[1], 'fingerprint', 'paused', 'cursor', 'fire_at', 'finished', 'job')
local result = 'same'
local cursor, fire_at = stored[3], stored[4]
if not stored[1] then
	result, cursor, fire_at = 'new', ARGV[8], ARGV[9]
elseif stored[1] ~= fingerprint then
	result, cursor, fire_at = 'changed', ARGV[10], ARGV[11]
elseif stored[2] == '1' and paused == '0' then
	result, cursor, fire_at = 'resumed', ARGV[10], ARGV[11]
end
if result == 'changed' or (paused == '1' and stored[2] ~= '1') then
	withdraw(KEYS[4], ARGV[13], {[KEYS[1]] = true})
end
if result ~= 'same' then
	redis.call('HSET', KEYS[1], 'cursor', cursor, 'fire_at', fire_at, 'finished', cursor == '' and '1' or '0')
end
redis.call('HSET', KEYS[1], 'name', name, 'fingerprint', fingerprint, 'spec', spec, 'job', job,
	'paused', paused, 'modified', ARGV[12])
redis.call('SADD', KEYS[3], name)
local finished = redis.call('HGET', KEYS[1], 'finished') == '1'
if paused == '0' and active == '1' and not finished and cursor ~= '' then
	redis.call('ZADD', KEYS[2], fire_at, member)
else
	redis.call('ZREM', KEYS[2], member)
end
return result

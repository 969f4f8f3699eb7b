-- update.lua: a front-door client's chat.update of a message it sent through the gateway.
--
-- The message's record (note.lua writes by and ch, its sender and channel; admit.lua id,
-- entry, ver and shown when admitted, held when a window held it, r when refused; settle.lua
-- adds cid and ts once Slack has it) takes the update as its latest content (m) and a new version; the edit
-- is queued once the message is posted (settle.lua queues it when the post comes later),
-- so updates coalesce and the latest wins. A ts with no record changes nothing: the gateway
-- edits only messages it posted for a front-door client (the caller checked it is the sender).
--
-- KEYS[1] the record of the gateway ts (hash)  KEYS[2] edits due (zset: record key -> since, us)
-- ARGV[1] the update (JSON: the message as the client sent it), ARGV[2] the record's life (ms)
-- Returns {'refused', level name} for an update of a refused message, {'unknown', ''} for a ts
-- with no record, else {'updated', ''}.

local record = KEYS[1]
if redis.call('EXISTS', record) == 0 then return {'unknown', ''} end
local refused = redis.call('HGET', record, 'r')
if refused then return {'refused', refused} end
redis.call('HSET', record, 'm', ARGV[1])
redis.call('HINCRBY', record, 'ver', 1)
redis.call('PEXPIRE', record, ARGV[2])
if redis.call('HEXISTS', record, 'ts') == 1 and redis.call('HGET', record, 'ts') ~= '' then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[2], 'NX', t[1] .. string.format('%06d', tonumber(t[2])), record)
end
return {'updated', ''}

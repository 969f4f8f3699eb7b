-- update.lua: a front-door client's chat.update of a message it knows by its ts.
--
-- The message's record (note.lua writes by and ch, its sender and channel; admit.lua id,
-- entry, ver and shown when admitted, held when a window held it, r when refused; settle.lua
-- adds cid and ts once Slack has it) takes the update as its latest content (m) and a new version; the edit
-- is queued once the message is posted (settle.lua queues it when the post comes later),
-- so updates coalesce and the latest wins. A ts with no record is a real Slack ts: a record
-- of its own (KEYS[2]) names the message as the client did.
--
-- KEYS[1] the record of the gateway ts (hash)  KEYS[2] the record of a real ts (hash)
-- KEYS[3] edits due (zset: record key -> since, us)
-- ARGV[1] the update (JSON: the message as the client sent it), ARGV[2] the records' life (ms),
-- ARGV[3] the channel the client named, ARGV[4] the ts
-- Returns {'refused', level name} for an update of a refused message, else {'updated', ''}.

local record = KEYS[1]
local refused = redis.call('HGET', record, 'r')
if refused then return {'refused', refused} end
if redis.call('EXISTS', record) == 0 then
  record = KEYS[2]
  redis.call('HSET', record, 'cid', ARGV[3], 'ts', ARGV[4], 'shown', 0)
end
redis.call('HSET', record, 'm', ARGV[1])
redis.call('HINCRBY', record, 'ver', 1)
redis.call('PEXPIRE', record, ARGV[2])
if redis.call('HEXISTS', record, 'ts') == 1 and redis.call('HGET', record, 'ts') ~= '' then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[3], 'NX', t[1] .. string.format('%06d', tonumber(t[2])), record)
end
return {'updated', ''}

-- ack.lua: acknowledge or unacknowledge an open alert, and queue the edit of its message.
--
-- Who and when are kept in the alert's record, so every replica shows and checks
-- the same. timers.lua reads them in the same store: an escalation step whose due
-- time comes after an acknowledgement is skipped (see timers.lua), so this call and
-- a step's claim are ordered by the store, never by the replicas' clocks.
--
-- KEYS[1] the alert's record (hash, see admit.lua)  KEYS[2] edits due (zset)
-- ARGV[1] 'ack' or 'unack'; for 'ack': ARGV[2] who (a Slack mention for a click,
--   else a name or the author), ARGV[3] where from ('slack', 'api', 'console' or 'cli')
--
-- Returns {0} when the record is no open alert (gone, never fired, or resolved);
-- else {1, who acknowledged ('' = nobody), when (us, '' = never), where from ('' = nobody),
-- who had acknowledged before this call ('' = nobody), and where from}: the audit log's "before".

local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local fired, resolved, e = unpack(redis.call('HMGET', KEYS[1], 'fired', 'resolved', 'e'))
if fired ~= '1' or resolved == '1' or not e then return {0} end
local was_by, was_src = unpack(redis.call('HMGET', KEYS[1], 'ack_by', 'ack_src'))

if ARGV[1] == 'ack' then
  redis.call('HSET', KEYS[1], 'ack_by', ARGV[2], 'ack_src', ARGV[3], 'ack_at', now)
else
  local at = redis.call('HGET', KEYS[1], 'ack_at')
  if at then
    -- The last acknowledged span: steps that came due within it stay skipped.
    redis.call('HSET', KEYS[1], 'lack', at .. ':' .. now)
  end
  redis.call('HDEL', KEYS[1], 'ack_by', 'ack_src', 'ack_at')
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
if redis.call('HEXISTS', KEYS[1], 'ts') == 1 then redis.call('ZADD', KEYS[2], 'NX', now, KEYS[1]) end
local by, at, src = unpack(redis.call('HMGET', KEYS[1], 'ack_by', 'ack_at', 'ack_src'))
return {1, by or '', at or '', src or '', was_by or '', was_src or ''}

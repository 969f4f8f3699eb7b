-- mark.lua: put a banner and a button on a posted message (a mute or unmute from Slack) and
-- queue its edit.
--
-- The record is an alert's (it has the event) or, for any other message, one made here
-- from the message as Slack showed it.
--
-- KEYS[1] the record (hash)  KEYS[2] edits due (zset)
-- ARGV[1] banner, ARGV[2] button ('mute' or 'unmute'), ARGV[3] channel id, ARGV[4] ts,
-- ARGV[5] for a new message record: the message's blocks without its state (JSON),
--   ARGV[6] its text, ARGV[7] its category, ARGV[8] how long to keep it (ms); '' each
--   for an alert's record
--
-- Returns 1 when the edit is queued, 0 when the alert's record is gone.

local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
if ARGV[5] ~= '' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'base', ARGV[5], 'text', ARGV[6], 'category', ARGV[7], 'ver', 0, 'shown', 0)
  end
  redis.call('HSET', KEYS[1], 'cid', ARGV[3], 'ts', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'banner', ARGV[1], 'button', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('ZADD', KEYS[2], 'NX', now, KEYS[1])
return 1

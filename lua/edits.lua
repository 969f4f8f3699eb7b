-- edits.lua: the queue of messages to edit, one entry per message (edits coalesce).
--
-- A record (an alert's, or a message clicked in Slack) is in the queue at most
-- once: every change while it waits rides in the one edit, which shows the
-- record as it is when the edit is made. A replica claims an entry for a lease;
-- a claim whose lease ran out (its replica died) goes back to the queue.
--
-- KEYS[1] edits due (zset: record key -> due time in us)
-- KEYS[2] edits claimed (zset: record key -> end of the lease in us)
-- KEYS[3] for 'done': the record (hash with 'ver' and 'shown')
-- ARGV[1] 'claim': ARGV[2] lease in ms. Returns the record key, or false when none is due (entries
--   whose record expired are dropped, not returned).
-- ARGV[1] 'done': ARGV[2] 'shown' (ARGV[3] the version the edit showed), 'retry'
--   (ARGV[3] in how many ms) or 'drop'. Returns 1 when the record is queued again.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x) return string.format('%.0f', x) end
local GONE = 64  -- due entries looked at per claim (each a record key of the same hash slot)

if ARGV[1] == 'claim' then
  for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', int(now), 'LIMIT', 0, 16)) do
    redis.call('ZREM', KEYS[2], lapsed)
    redis.call('ZADD', KEYS[1], 'NX', int(now), lapsed)
  end
  -- The first due entry whose record still exists; those of expired records are dropped on the
  -- way (up to GONE per call), so they cost no edit slot and the queue never outgrows the records.
  for _, due in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', int(now), 'LIMIT', 0, GONE)) do
    redis.call('ZREM', KEYS[1], due)
    if redis.call('EXISTS', due) == 1 then
      redis.call('ZADD', KEYS[2], int(now + tonumber(ARGV[2]) * 1000), due)
      return due
    end
  end
  return false
end

redis.call('ZREM', KEYS[2], KEYS[3])
if ARGV[2] == 'retry' then
  redis.call('ZADD', KEYS[1], 'NX', int(now + tonumber(ARGV[3]) * 1000), KEYS[3])
  return 1
end
if ARGV[2] == 'shown' and redis.call('EXISTS', KEYS[3]) == 1 then
  local shown = tonumber(ARGV[3])
  if shown > tonumber(redis.call('HGET', KEYS[3], 'shown') or '0') then
    redis.call('HSET', KEYS[3], 'shown', shown)
  end
  if tonumber(redis.call('HGET', KEYS[3], 'ver') or '0') > shown then
    redis.call('ZADD', KEYS[1], 'NX', int(now), KEYS[3])  -- changed while the edit was made
    return 1
  end
end
return 0

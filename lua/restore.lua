-- restore.lua: hand over one event a replica admitted by itself while the store was
-- unreachable (NOTIFIER_ON_STORE_ERROR=fail_open), now that the store answers again.
--
-- The event is queued, written into its levels' sliding logs at the time the replica
-- admitted it (the only record of that moment is the replica's clock) and counted,
-- all in one atomic step, so it is never queued without being counted, nor twice: the
-- first run marks the event handed over, and a run again (its reply was lost, so the
-- replica still holds the event and hands it over again) does nothing.
--
-- KEYS[1] global log (zset)   KEYS[2] category log (zset)   KEYS[3] outbox (stream)
-- KEYS[4] stats (hash)        KEYS[5] categories seen (set)
-- KEYS[6] the event's hand-over mark (string, Keys.restored)
-- KEYS[7] class log (zset), only when the event has a class of a reserve
-- ARGV[1] event id, ARGV[2] category, ARGV[3] admitted at (us, the replica's clock),
-- ARGV[4] outbox entry (notifier/outbox.py JSON), ARGV[5] global longest window (ms),
-- ARGV[6] category longest window (ms), ARGV[7] category cap (0 = none; see admit.lua),
-- ARGV[8] how long the mark is kept (ms)
--
-- Returns the outbox entry id, or false when the event was handed over before.

if not redis.call('SET', KEYS[6], '1', 'NX', 'PX', ARGV[8]) then return false end
local id, category, at = ARGV[1], ARGV[2], ARGV[3]
local logs = {{KEYS[1], ARGV[5]}, {KEYS[2], ARGV[6]}}
if KEYS[7] then logs[#logs + 1] = {KEYS[7], ARGV[5]} end
for _, log in ipairs(logs) do
  redis.call('ZADD', log[1], at, id)
  redis.call('PEXPIRE', log[1], log[2])
end
local named = category
local cap = tonumber(ARGV[7])
if cap > 0 and redis.call('SISMEMBER', KEYS[5], category) == 0 then
  if redis.call('SCARD', KEYS[5]) >= cap then named = '(other)' else redis.call('SADD', KEYS[5], category) end
elseif cap == 0 then
  redis.call('SADD', KEYS[5], category)
end
redis.call('HINCRBY', KEYS[4], 'accepted', 1)
redis.call('HINCRBY', KEYS[4], 'accepted:' .. named, 1)
return redis.call('XADD', KEYS[3], '*', 'e', ARGV[4])

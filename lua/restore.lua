-- restore.lua: hand over one event a replica admitted by itself while the store was
-- unreachable (NOTIFIER_ON_STORE_ERROR=fail_open), now that the store answers again.
-- It starts with lua/counts.lua (the stats of outcomes).
--
-- The event is queued, written into the sliding logs of its value at every level at the
-- time the replica admitted it (the only record of that moment is the replica's clock)
-- and counted, all in one atomic step, so it is never queued without being counted, nor
-- twice: the first run marks the event handed over, and a run again (its reply was lost,
-- so the replica still holds the event and hands it over again) does nothing.
--
-- KEYS[1] outbox (stream)  KEYS[2] stats (hash)  KEYS[3] categories named (set)
-- KEYS[4 .. 2+N] per level below the root, the values its stats name (set)
-- then per level: the log of the event's value there (zset), and its class log when
--   that value has reserves
-- then, last, the event's hand-over mark (string, Keys.restored)
-- ARGV[1] event id, ARGV[2] category, ARGV[3] admitted at (us, the replica's clock),
-- ARGV[4] outbox entry (notifier/outbox.py JSON), ARGV[5] value cap (0 = none; see
-- admit.lua), ARGV[6] N, then per level: its name, the event's value there, its longest
-- window (ms), and 1 when it has a class log, else 0; then, last, how long the mark is kept (ms)
--
-- Returns the outbox entry id, or false when the event was handed over before.

if not redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', ARGV[#ARGV]) then return false end
local id, category, at, cap, N = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[5]), tonumber(ARGV[6])
local levels, sets, values = {}, {}, {}
local k, a = 3 + N, 7
for l = 1, N do
  levels[l] = ARGV[a]
  if l > 1 then sets[l], values[l - 1] = KEYS[2 + l], ARGV[a + 1] end
  local logs = ARGV[a + 3] == '1' and 2 or 1
  for i = 0, logs - 1 do
    redis.call('ZADD', KEYS[k + i], at, id)
    redis.call('PEXPIRE', KEYS[k + i], ARGV[a + 2])
  end
  k, a = k + logs, a + 4
end
counter(KEYS[2], KEYS[3], sets, levels, cap)('accepted', category, values, 1)
return redis.call('XADD', KEYS[1], '*', 'e', ARGV[4])

-- digest.lua: claim the digest of suppressed events for one channel, if it is due.
--
-- Atomic, so exactly one replica claims each digest: the counts are taken and
-- cleared, and the digest is appended to the outbox in the same step, to be
-- delivered (and paced) like any message. Every drop counted since the last
-- digest is in this one, whatever the number of categories: the entry names the
-- largest ones and sums up the rest.
--
-- KEYS[1] digests due (zset: channel -> due time in us)
-- KEYS[2] suppressed counts of the channel (hash: category -> n, '_since' -> us,
--   '(other)' -> drops of categories past the cap, see admit.lua)
-- KEYS[3] outbox (stream)
-- ARGV[1] channel, ARGV[2] digest id, ARGV[3] how many categories the entry names
--
-- Returns 0 when nothing is due, else the number of drops in the digest.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) > now then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])

local counts = redis.call('HGETALL', KEYS[2])
redis.call('DEL', KEYS[2])
local since, named, unnamed, total = string.format('%.0f', now), {}, 0, 0
for i = 1, #counts, 2 do
  local field, n = counts[i], tonumber(counts[i + 1])
  if field == '_since' then
    since = counts[i + 1]
  else
    total = total + n
    if field == '(other)' then unnamed = n else named[#named + 1] = {field, n} end
  end
end
if total == 0 then return 0 end
table.sort(named, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
local shown, more, more_n = {}, 0, 0
for i = 1, #named do
  if i <= tonumber(ARGV[3]) then shown[#shown + 1] = named[i]
  else more, more_n = more + 1, more_n + named[i][2] end
end
-- The outbox entry of notifier/outbox.py (times as strings: cjson keeps 14 digits).
local entry = cjson.encode({k = 'digest', id = ARGV[2], ch = ARGV[1], counts = shown, more = {more, more_n},
  unnamed = unnamed, total = total, since = since, ['until'] = string.format('%.0f', now)})
redis.call('XADD', KEYS[3], '*', 'e', entry)
return total

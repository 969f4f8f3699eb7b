-- digest.lua: claim the digest of suppressed events for one channel, if it is due.
--
-- Atomic, so exactly one replica claims each digest: the counts are taken and
-- cleared, and the digest is appended to the outbox in the same step, to be
-- delivered (and paced) like any message.
--
-- KEYS[1] digests due (zset: channel -> due time in us)
-- KEYS[2] suppressed counts of the channel (hash: category -> n, '_since' -> us)
-- KEYS[3] outbox (stream)
-- ARGV[1] channel, ARGV[2] digest id
--
-- Returns {} when nothing is due, else {since us, now us, category, n, ...}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) > now then return {} end
redis.call('ZREM', KEYS[1], ARGV[1])

local counts = redis.call('HGETALL', KEYS[2])
redis.call('DEL', KEYS[2])
local since, flat = string.format('%.0f', now), {}
for i = 1, #counts, 2 do
  if counts[i] == '_since' then
    since = counts[i + 1]
  else
    flat[#flat + 1] = counts[i]
    flat[#flat + 1] = counts[i + 1]
  end
end
if #flat == 0 then return {} end
local until_us = string.format('%.0f', now)
local pairs_, total = {}, 0
for i = 1, #flat, 2 do
  local n = tonumber(flat[i + 1])
  pairs_[#pairs_ + 1] = {flat[i], n}
  total = total + n
end
-- The outbox entry of notifier/outbox.py (times as strings: cjson keeps 14 digits).
local entry = cjson.encode({k = 'digest', id = ARGV[2], ch = ARGV[1], counts = pairs_,
  more = {0, 0}, total = total, since = since, ['until'] = until_us})
redis.call('XADD', KEYS[3], '*', 'e', entry)
local reply = {since, until_us}
for i = 1, #flat do reply[#reply + 1] = flat[i] end
return reply

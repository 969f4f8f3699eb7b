-- handover.lua: hand over what one (channel, window) pair held, once its window ended.
--
-- Atomic, so exactly one replica hands each pair over, and a replica killed after the
-- call loses nothing (the messages are outbox entries, claimed and reclaimed like any):
-- the summary is appended to the outbox, then each held alert still firing as its own
-- message (its record's event entry: posted, it shows its repeats and acknowledgement,
-- and settle.lua starts its escalation), and the held store is cleared. Resolved alerts
-- and plain events are only counted in the summary. A second call finds nothing.
--
-- KEYS[1] held pairs (set of pair ids, see admit.lua)  KEYS[2] outbox (stream)
-- KEYS[3..5] the open-alert index (see admit.lua): open alerts (zset: record key -> first
--   seen), their ends (zset: record key -> end of its window, us), dedup_keys (hash)
-- KEYS[6..9] the pair's summary (hash), counts per category (hash), latest plain events
--   (list), held alerts (set of record keys: the records are read through it, all in the
--   deployment's slot)
-- ARGV[1] pair id, ARGV[2] the end of its window as the replica's policy knows it (us of
--   the store's clock; 0: no longer in force), ARGV[3] the summary's id, ARGV[4] how many
--   categories the entry names (the rest summed)
--
-- Returns -1 when the pair holds nothing (handed over already), -2 when its window is
-- still in force by this clock, else the number of alerts posted.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x) return string.format('%.0f', x) end
local pid = ARGV[1]
if redis.call('SISMEMBER', KEYS[1], pid) == 0 then return -1 end
if now < tonumber(ARGV[2]) then return -2 end

local sum = {}
local raw = redis.call('HGETALL', KEYS[6])
for i = 1, #raw, 2 do sum[raw[i]] = raw[i + 1] end
local counts, named, unnamed = redis.call('HGETALL', KEYS[7]), {}, 0
for i = 1, #counts, 2 do
  if counts[i] == '(other)' then unnamed = tonumber(counts[i + 1])
  else named[#named + 1] = {counts[i], tonumber(counts[i + 1])} end
end
table.sort(named, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
local shown, more, more_n = {}, 0, 0
for i = 1, #named do
  if i <= tonumber(ARGV[4]) then shown[#shown + 1] = named[i]
  else more, more_n = more + 1, more_n + named[i][2] end
end
local quotes = {}
for _, entry in ipairs(redis.call('LRANGE', KEYS[8], 0, -1)) do
  local e = cjson.decode(entry)
  quotes[#quotes + 1] = {e.cat, e.ev.text, e.ev.severity or 'info'}
end
local channel = sum.channel or ''
if channel ~= '' then
  -- The outbox entry of notifier/outbox.py (times as strings: cjson keeps 14 digits).
  redis.call('XADD', KEYS[2], '*', 'e', cjson.encode({k = 'held', id = ARGV[3], ch = channel,
    window = sum.window or '', total = tonumber(sum.n or '0'), dropped = tonumber(sum.dropped or '0'),
    counts = shown, more = {more, more_n}, unnamed = unnamed, quotes = quotes,
    since = sum.since or int(now), ['until'] = int(now)}))
end

local posted = 0
for _, rec in ipairs(redis.call('SMEMBERS', KEYS[9])) do
  local fired, resolved, e, ttl, held = unpack(redis.call('HMGET', rec, 'fired', 'resolved', 'e', 'ttl', 'held'))
  if held == pid then
    redis.call('HDEL', rec, 'held')
    local ms = math.max(1, math.ceil(tonumber(ttl or '1000') / 1000))
    redis.call('PEXPIRE', rec, ms)
    if fired == '1' and resolved ~= '1' and e then
      redis.call('HSET', rec, 'entry', redis.call('XADD', KEYS[2], '*', 'e', e))
      -- Open for its window from now (a long window may have outlasted its place in the index).
      redis.call('ZADD', KEYS[3], redis.call('HGET', rec, 'first') or int(now), rec)
      redis.call('ZADD', KEYS[4], int(now + ms * 1000), rec)
      redis.call('HSET', KEYS[5], string.sub(rec, -32), rec)
      posted = posted + 1
    end
  end
end
redis.call('DEL', KEYS[6], KEYS[7], KEYS[8], KEYS[9])
redis.call('SREM', KEYS[1], pid)
return posted

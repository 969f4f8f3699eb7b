-- timers.lua: things due later, taken by exactly one replica: escalation steps, and
-- the sweep of the open-alert index.
--
-- 'step': an alert's next escalation step, if due. The timer's score is only when
-- to look; the record decides: steps count from 'eb' (the message's post, or the
-- reopening), 'esc' is the next step (from 0). In one atomic call this checks the
-- record and either appends the step to the outbox (so it is delivered, paced and,
-- should the replica die, reclaimed like any message), skips it, or drops the timer.
-- How a step races an acknowledgement or resolution: both are writes to the record
-- in this same store, and a step is only taken once the store's clock reached its
-- due time. So an acknowledgement answered before the due time is always seen here:
-- every step that came due while acknowledged (now, or within the last
-- acknowledged span 'lack'), or while its category is muted, is skipped for good;
-- a resolved alert's timer is dropped. A step taken is in the outbox before any
-- later acknowledgement can run: it is posted (it came due unacknowledged).
--
-- KEYS for 'step': [1] timers (zset: record key -> when to look, us), [2] outbox
--   (stream), [3] stats (hash), [4] overrides (hash, see override.lua), [5] the record
-- ARGV for 'step': [1] 'step', [2] what a category's mute is called in overrides, before
--   the category ('' when the level named category holds it, else 'LEVEL='), then S
--   (severities with steps), then per severity: its name, n, then n pairs: the step's
--   offset (us), its text
--   Returns 1 when a step was appended to the outbox, else 0.
--
-- KEYS for 'sweep': [1] open alerts, [2] their ends, [3] dedup_key index (see
--   admit.lua), then the record keys to check. ARGV[1] 'sweep'.
--   Returns how many ended alerts left the index.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x) return string.format('%.0f', x) end

if ARGV[1] == 'sweep' then
  local removed = 0
  for i = 4, #KEYS do
    local rec = KEYS[i]
    local ends = redis.call('ZSCORE', KEYS[2], rec)
    if ends and tonumber(ends) <= now then
      redis.call('ZREM', KEYS[1], rec)
      redis.call('ZREM', KEYS[2], rec)
      local digest = string.sub(rec, -32)
      if redis.call('HGET', KEYS[3], digest) == rec then redis.call('HDEL', KEYS[3], digest) end
      removed = removed + 1
    end
  end
  return removed
end

local timers, rec = KEYS[1], KEYS[5]
local due = redis.call('ZSCORE', timers, rec)
if not due or tonumber(due) > now then return 0 end  -- another replica took it, or not yet

local fired, resolved, e, eb, esc, ack_by, lack = unpack(
  redis.call('HMGET', rec, 'fired', 'resolved', 'e', 'eb', 'esc', 'ack_by', 'lack'))
if fired ~= '1' or resolved == '1' or not e or not eb then
  redis.call('ZREM', timers, rec)  -- gone, resolved, or never posted: nothing more to say
  return 0
end

local entry = cjson.decode(e)
local severity = (type(entry.ev) == 'table' and entry.ev.severity) or 'info'
local steps, at = {}, 4
for _ = 1, tonumber(ARGV[3]) do
  local name, n = ARGV[at], tonumber(ARGV[at + 1])
  for i = 1, n do
    if name == severity then steps[i] = {tonumber(ARGV[at + 2 * i]), ARGV[at + 2 * i + 1]} end
  end
  at = at + 2 + 2 * n
end

-- A category muted now (an override with a 0 rule, in force): its steps are skipped.
local function muted(category)
  local raw = redis.call('HGET', KEYS[4], ARGV[2] .. category)
  if not raw then return false end
  local override = cjson.decode(raw)
  local ends = override['until']
  if ends ~= '' and tonumber(ends) <= now then return false end
  return string.find(',' .. override.rules, ',%s*0+%s*/') ~= nil
end

local base, i = tonumber(eb), tonumber(esc or '0')
local lack_from, lack_to = string.match(lack or '', '^(%d+):(%d+)$')
local function skipped(step_due)
  if ack_by then return true end
  if lack_from and step_due >= tonumber(lack_from) and step_due <= tonumber(lack_to) then return true end
  return muted(entry.cat)
end

local posted = 0
while i < #steps and base + steps[i + 1][1] <= now do
  local step = steps[i + 1]
  i = i + 1
  if not skipped(base + step[1]) then
    local body = cjson.encode({k = 'esc', id = rec .. ':' .. eb .. ':' .. i, cat = entry.cat, ch = entry.ch,
                               rec = rec, text = step[2], at = now / 1000000})
    redis.call('XADD', KEYS[2], '*', 'e', body)
    redis.call('HINCRBY', rec, 'escn', 1)
    redis.call('HINCRBY', KEYS[3], 'escalated', 1)
    posted = 1
    break  -- one step per call: the next one, if due too, is the next call's
  end
end
redis.call('HSET', rec, 'esc', i)
if i < #steps then
  redis.call('ZADD', timers, int(base + steps[i + 1][1]), rec)
else
  redis.call('ZREM', timers, rec)
end
return posted

-- admit.lua: hierarchical sliding-log admission for a batch of events, in order.
--
-- Each event is checked against every rule of the global level and of its
-- category level. Only when all rules hold is it added to the logs, its alert
-- recorded and its outbox entry appended, so admission and queueing are one
-- atomic step. A refused event changes no log: it only bumps the drop counters
-- and the per-channel digest of suppressed events.
--
-- Fair shares. The global level may be split into K classes (critical events, or
-- a category with a reserve). Under a global rule COUNT/W, class c owns R[c]
-- reserved slots and S = COUNT - sum R is shared. An event of class c is admitted
-- by the rule when its class admitted fewer than R[c] in the last W, or else
-- when the overflow (per class, admissions above R[c], plus every event of no
-- class) is below S. Each class (and "no class") keeps its own log for that.
--
-- KEYS[1] global log (zset: member = event id, score = admission time in us)
-- KEYS[2] outbox (stream)          KEYS[3] stats (hash)
-- KEYS[4] categories named (set)   KEYS[5] digests due (zset: channel -> due time in us)
-- KEYS[6] override version (string)  KEYS[7] edits due (zset: record key -> since, us)
-- KEYS[8] log of the events of no class, KEYS[9 .. 8+K] the log of each class (zsets;
--   only used with K > 0: then every admitted event is in the global log and in one of
--   these; entries admitted before the reserves were set are in the global log only)
-- KEYS[9+K] open alerts (zset: record key -> first seen, us), KEYS[10+K] their ends
--   (zset: record key -> end of the record's window, us), KEYS[11+K] the index of
--   dedup_keys (hash: the record key's last 32 characters -> record key); written
--   here, trimmed by timers.lua as records expire
-- KEYS[12+K] the (channel, window) pairs holding anything (set of pair ids); a pair's
--   held store is 4 keys named after it (see held_in; same slot): its summary (hash:
--   window, channel, start, end, since, n held, dropped), its counts per category (hash,
--   capped like digests), its latest plain events (list of entries, newest first, at most
--   LATEST) and its held alerts (set of record keys). handover.lua empties it.
-- KEYS[13+K] the alert epoch (string, a counter): bumped whenever a firing alert stops
--   firing here (a resolution), so replicas that answer repeats themselves forget
--   what they knew (see "Repeats decided on a replica" below)
-- then per group of refusals, 1 key: the suppressed counts (hash) of its channel
-- then per group of repeats, 1 key: the alert's record
-- then per event, 3 keys: category log, alert record (hash; any key of the slot
--   when the event has no dedup_key), suppressed counts of its channel
--
-- An alert's record (for as long as its category's longest window) holds: id (its
-- first event), fired/resolved (1/0: an event of that status was admitted), n
-- (times seen), first and last (us), ver (changes), shown (the version its message
-- shows), entry (its outbox entry id), e (that entry); reopened (times), rat (when
-- it was resolved, us), eb (escalation counts from then, us); held (the pair id of the
-- window holding its first post, until handover.lua posts it) and ttl (its lifetime,
-- us: a held record lives until its hand-over); settle.lua adds cid
-- and ts, the message's identity in Slack; ack.lua ack_by, ack_src, ack_at; timers.lua
-- esc (the next escalation step, from 0) and escn (steps posted).
--
-- Reopen: a firing event whose alert was resolved within the window is decided by
-- the limits like a new event. Admitted, it answers 'reopened' (with the first
-- event's id), is counted in accepted, queues its entry as a 'Firing again' reply
-- (the entry's kind rewritten from event to reopen), and the record is firing
-- again: acknowledgement cleared, escalation counting from now, a fresh window.
--
-- ARGV[1] deadline in us of the store's clock (0 = none): later, nothing is done
-- ARGV[2] override version the arguments were built under; ARGV[3] first lapse (us,
--   0 = none) of an override they include. Either out of date: nothing is done.
-- ARGV[4] digest interval in us (0 = no digests), ARGV[5] shadow mode (1/0),
-- ARGV[6] category cap: how many categories stats and digests name (0 = all),
-- ARGV[7] edits (1/0): repeats and resolutions edit the posted message
-- ARGV[8] G, the number of global rules, then G pairs: limit, window in us; then
--   the lapse of the global override (us, 0 = none); then K, and per class G
--   reserved slot counts (one per global rule)
-- then R, the number of groups of refusals a replica decided itself (the level was
--   known full), and per group: category, channel, level, count, hold (4 values, below).
--   Only counted (in the held summary when the window holds, else in the digest).
-- then D, the number of groups of repeats a replica answered 'duplicate' itself, and
--   per group: the alert's first event id, count, time of the last one (us)
-- then per event: id, category, channel, class (0 = none, else 1..K), mode (0 = no
--   dedup_key, 1 = firing, 2 = resolved), hold: the window of its channel in force or
--   next (name, '' = none; start us; end us; the pair id of (channel, window, start),
--   Keys.held_pair), held when start <= now < end by this clock (an admitted event then
--   goes to the held store, not the outbox), outbox entry (notifier/outbox.py JSON),
--   for mode 2 its entry as a reply, the lapse of the category override (us, 0 =
--   none), C (number of category rules), then C pairs: limit, window in us
--
-- Returns {'expired'} or {'stale', version} when nothing was done; else one entry
--   per event, none per group of refusals or repeats: {outcome, id, level, global wait
--   in us, global rule index, category wait in us, category rule index, life}, then
--   the alert epoch as it was when the call began (an integer). life is, for a firing
--   event whose alert is firing after it (accepted, reopened, duplicate), how long its
--   record lives on (us), else 0. outcome is
--   'accepted', 'dropped', 'duplicate', 'resolved' or 'reopened' (id is then the
--   alert's first event's), or 'shadow' (would be dropped, admitted in shadow mode); level is
--   the refusing level, the one that stays full longer (global on a tie); a
--   level's wait is how long it stays full for this event (0 when it has room):
--   the time until it would be admitted if nothing else were.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then return {'expired'} end
local version = redis.call('GET', KEYS[6]) or '0'
local lapse = tonumber(ARGV[3])
if version ~= ARGV[2] or (lapse > 0 and now >= lapse) then return {'stale', version} end

-- Integers go to Redis as exact decimal strings (plain tostring loses digits).
local function int(x) return string.format('%.0f', x) end
local INF = math.huge

local digest_us, shadow = tonumber(ARGV[4]), ARGV[5] == '1'
local cap, edits = tonumber(ARGV[6]), ARGV[7] == '1'

local function read_rules(at)
  local n, rules, longest = tonumber(ARGV[at]), {}, 0
  for i = 1, n do
    local limit, window = tonumber(ARGV[at + 2 * i - 1]), tonumber(ARGV[at + 2 * i])
    rules[i] = {limit, window}
    if window > longest then longest = window end
  end
  return rules, longest, at + 2 * n + 1
end

local global_rules, global_longest, at = read_rules(8)
local G = #global_rules
local global_until = tonumber(ARGV[at])
local K = tonumber(ARGV[at + 1])
at = at + 2
local reserved, shared = {}, {}  -- reserved[c][r]; shared[r] = COUNT - sum of reserves
for r = 1, G do shared[r] = global_rules[r][1] end
for c = 1, K do
  reserved[c] = {}
  for r = 1, G do
    reserved[c][r] = tonumber(ARGV[at + r - 1])
    shared[r] = shared[r] - reserved[c][r]
  end
  at = at + G
end
local groups = tonumber(ARGV[at])
at = at + 1

local function trim(key, longest)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
end

local function count_in(key, window)
  return redis.call('ZCOUNT', key, '(' .. int(now - window), '+inf')
end

-- The score of the entry at 0-based position i (oldest first) of a window, or nil.
local function nth(key, window, i)
  local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(now - window), '+inf', 'WITHSCORES', 'LIMIT', i, 1)
  return e[2] and tonumber(e[2])
end

-- The global level, read once per call: one clock for the whole batch, so counts
-- only change by this call's own admissions, which update them. Counts read windows
-- by score, so old entries are trimmed only where an event is added (see admit).
local total, used, over, plain = {}, {}, {}, {}  -- per rule: all, per class, overflow, no class
for r = 1, G do total[r] = count_in(KEYS[1], global_rules[r][2]) end
for c = 0, K do used[c] = {} end
for r = 1, G do
  over[r], plain[r] = total[r], total[r]
  if K > 0 then
    plain[r] = count_in(KEYS[8], global_rules[r][2])
    for c = 1, K do
      used[c][r] = count_in(KEYS[8 + c], global_rules[r][2])
      over[r] = over[r] - math.min(used[c][r], reserved[c][r])
    end
  end
end

-- Entries of a window scored up to s (inclusive).
local function count_to(key, window, s)
  return redis.call('ZCOUNT', key, '(' .. int(now - window), int(s))
end

-- The time of the k-th (from 1) departure that lowers the overflow of rule r: an
-- entry of no class, or one of the oldest used - reserved entries of a class over
-- its reserve.
local function kth_departure(r, k)
  local window = global_rules[r][2]
  if K == 0 then return nth(KEYS[1], window, k - 1) end
  local classed = 0
  for c = 1, K do classed = classed + used[c][r] end
  if total[r] == classed + plain[r] and k <= 32 then
    -- Every entry has its class log (the usual case): merge the first k of each source.
    local scores = {}
    for c = 0, K do
      local n = c == 0 and k or math.min(k, used[c][r] - reserved[c][r])
      if n > 0 then
        local e = redis.call('ZRANGEBYSCORE', KEYS[8 + c], '(' .. int(now - window), '+inf', 'WITHSCORES', 'LIMIT', 0, n)
        for i = 2, #e, 2 do scores[#scores + 1] = tonumber(e[i]) end
      end
    end
    table.sort(scores)
    return scores[k]
  end
  -- Else (entries admitted before these reserves were set) count departures by time:
  -- all entries, less those of classes, plus each class's excess over its reserve.
  local function departed(s)
    local n = count_to(KEYS[1], window, s)
    for c = 1, K do
      local in_class = count_to(KEYS[8 + c], window, s)
      n = n - in_class + math.min(math.max(0, used[c][r] - reserved[c][r]), in_class)
    end
    return n
  end
  local lo, hi = now - window + 1, now
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if departed(mid) >= k then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- How long rule r refuses an event of class c (0: it admits it now).
local function rule_wait(r, c)
  local window = global_rules[r][2]
  if c > 0 and used[c][r] < reserved[c][r] then return 0 end
  if over[r] < shared[r] then return 0 end
  local wait = INF
  if c > 0 and reserved[c][r] > 0 then
    wait = nth(KEYS[8 + c], window, used[c][r] - reserved[c][r]) + window - now
  end
  if shared[r] > 0 then
    wait = math.min(wait, kth_departure(r, over[r] - shared[r] + 1) + window - now)
  end
  if wait == INF then wait = window end  -- nothing ever frees a slot (a mute): a window is the hint
  return wait
end

local function capped(wait, lapse_us)
  if wait > 0 and lapse_us > 0 and wait > lapse_us - now then return lapse_us - now end
  return wait
end

local global_waits = {}  -- class -> {wait, rule}, until the next admission changes the level
local function global_wait(c)
  local cached = global_waits[c]
  if cached then return cached[1], cached[2] end
  local wait, worst = 0, 0
  for r = 1, G do
    local w = rule_wait(r, c)
    if w > wait then wait, worst = w, r end
  end
  wait = capped(wait, global_until)
  global_waits[c] = {wait, worst}
  return wait, worst
end

local categories = {}  -- category log -> {rules, counts}: read once per call
local function category_state(key, rules, longest)
  local state = categories[key]
  if not state then
    local counts = {}
    for i = 1, #rules do counts[i] = count_in(key, rules[i][2]) end
    state = {rules = rules, counts = counts}
    categories[key] = state
  end
  return state
end

local function category_wait(key, state, lapse_us)
  local wait, worst = 0, 0
  for i = 1, #state.rules do
    local limit, window = state.rules[i][1], state.rules[i][2]
    if state.counts[i] >= limit then
      local w = window  -- a 0 limit (a muted level) never frees a slot: a window is the hint
      if limit > 0 then w = nth(key, window, state.counts[i] - limit) + window - now end
      if w > wait then wait, worst = w, i end
    end
  end
  return capped(wait, lapse_us), worst
end

local named = {}  -- category -> the name stats give it: itself, or '(other)' past the cap
local function name_of(category)
  local name = named[category]
  if name then return name end
  name = category
  if redis.call('SISMEMBER', KEYS[4], category) == 0 then
    if cap > 0 and redis.call('SCARD', KEYS[4]) >= cap then name = '(other)'
    else redis.call('SADD', KEYS[4], category) end
  end
  named[category] = name
  return name
end

local HELD, LATEST = KEYS[12 + K], 5  -- LATEST: the plain events a hand-over quotes

-- The held store of (channel, window) when the window holds now, else nil. Nothing is
-- written until something is held there (see opened_store).
local function held_in(channel, name, start_us, end_us, pid)
  if name == '' or now < start_us or now >= end_us then return nil end
  local base = HELD .. ':' .. pid
  return {pid = pid, sum = base .. ':sum', cats = base .. ':cats', latest = base .. ':latest',
          alerts = base .. ':alerts', channel = channel, name = name, start = start_us, finish = end_us}
end

-- Marks the pair as holding something, so that a replica hands it over when its window ends.
local function opened_store(h)
  if redis.call('SADD', HELD, h.pid) == 1 then
    redis.call('HSET', h.sum, 'window', h.name, 'channel', h.channel, 'start', int(h.start), 'since', int(now))
  end
  redis.call('HSET', h.sum, 'end', int(h.finish))
end

local function count_drop(category, level, sup_key, channel, n, held)
  redis.call('HINCRBY', KEYS[3], 'dropped', n)
  redis.call('HINCRBY', KEYS[3], 'dropped_' .. level, n)
  redis.call('HINCRBY', KEYS[3], 'dropped:' .. name_of(category), n)
  if held and not shadow then
    opened_store(held)
    redis.call('HINCRBY', held.sum, 'dropped', n)  -- the channel's digest is folded into the hand-over
  elseif digest_us > 0 and not shadow then
    local field = category  -- a digest names at most cap categories per interval
    if cap > 0 and redis.call('HEXISTS', sup_key, category) == 0 and redis.call('HLEN', sup_key) >= cap + 2 then
      field = '(other)'
    end
    redis.call('HINCRBY', sup_key, field, n)
    redis.call('HSETNX', sup_key, '_since', int(now))
    redis.call('ZADD', KEYS[5], 'NX', int(now + digest_us), channel)
  end
end

local OPEN, ENDS, INDEX = KEYS[9 + K], KEYS[10 + K], KEYS[11 + K]
local EPOCH = KEYS[13 + K]
local epoch_at_start = tonumber(redis.call('GET', EPOCH) or '0')

-- A firing alert is open until it is resolved or its record expires.
local function opened(rec, first, longest)
  redis.call('ZADD', OPEN, first, rec)
  redis.call('ZADD', ENDS, int(now + longest), rec)
  redis.call('HSET', INDEX, string.sub(rec, -32), rec)
end

local function closed(rec)
  redis.call('ZREM', OPEN, rec)
  redis.call('ZREM', ENDS, rec)
  if redis.call('HGET', INDEX, string.sub(rec, -32)) == rec then redis.call('HDEL', INDEX, string.sub(rec, -32)) end
end

local function record_admitted(rec, e, stream_id, longest)
  redis.call('DEL', rec)
  redis.call('HSET', rec, 'id', e.id, 'fired', e.mode == 1 and '1' or '0', 'resolved', e.mode == 2 and '1' or '0',
    'n', 1, 'first', int(now), 'last', int(now), 'ver', 1, 'shown', 0, 'entry', stream_id, 'e', e.entry)
  redis.call('PEXPIRE', rec, math.ceil(longest / 1000))
  if e.mode == 1 then opened(rec, int(now), longest) end
end

-- A change to an alert's message: coalesced into one pending edit, once it is posted.
local function touch(rec)
  redis.call('HINCRBY', rec, 'ver', 1)
  if edits and redis.call('HEXISTS', rec, 'ts') == 1 then redis.call('ZADD', KEYS[7], 'NX', int(now), rec) end
end

local trimmed = {}  -- logs trimmed by this call
local function add(key, id, longest)
  if not trimmed[key] then
    trim(key, longest)
    trimmed[key] = true
  end
  redis.call('ZADD', key, int(now), id)
  redis.call('PEXPIRE', key, math.ceil(longest / 1000))
end

-- Counts an admission in every log and the stats; the caller queues what it posts.
local function count_admission(e, c, state, longest)
  add(KEYS[1], e.id, global_longest)
  add(e.cat_key, e.id, longest)
  if K > 0 then add(KEYS[8 + c], e.id, global_longest) end
  for r = 1, G do
    total[r] = total[r] + 1
    if c == 0 then
      over[r], plain[r] = over[r] + 1, plain[r] + 1
    else
      if used[c][r] >= reserved[c][r] then over[r] = over[r] + 1 end
      used[c][r] = used[c][r] + 1
    end
  end
  for i = 1, #state.counts do state.counts[i] = state.counts[i] + 1 end
  global_waits = {}
  redis.call('HINCRBY', KEYS[3], 'accepted', 1)
  redis.call('HINCRBY', KEYS[3], 'accepted:' .. name_of(e.category), 1)
end

-- An admitted event of a held channel: counted in the held store instead of posted.
local function hold(e, h, longest)
  opened_store(h)
  redis.call('HINCRBY', h.sum, 'n', 1)
  local field = e.category
  if cap > 0 and redis.call('HEXISTS', h.cats, field) == 0 and redis.call('HLEN', h.cats) >= cap then
    field = '(other)'
  end
  redis.call('HINCRBY', h.cats, field, 1)
  if e.mode == 0 then  -- only counted, the latest few quoted: the store stays bounded
    redis.call('LPUSH', h.latest, e.entry)
    redis.call('LTRIM', h.latest, 0, LATEST - 1)
    return
  end
  record_admitted(e.rec, e, '', longest)
  redis.call('HSET', e.rec, 'held', h.pid, 'ttl', int(longest))
  redis.call('PERSIST', e.rec)  -- kept until its hand-over, however long the window
  if e.mode == 1 then redis.call('ZADD', ENDS, int(h.finish + longest), e.rec) end
  redis.call('SADD', h.alerts, e.rec)
end

local function admit(e, c, state, longest)
  count_admission(e, c, state, longest)
  if e.held then return hold(e, e.held, longest) end
  local stream_id = redis.call('XADD', KEYS[2], '*', 'e', e.entry)
  if e.mode > 0 then record_admitted(e.rec, e, stream_id, longest) end
end

-- A resolved alert fires again: one message for its whole life, a reply in its thread.
local function reopen(e, c, state, longest)
  count_admission(e, c, state, longest)
  local reply, swapped = string.gsub(e.entry, '^{"k":"event"', '{"k":"reopen"', 1)
  if swapped ~= 1 then error('admit.lua: the entry of ' .. e.id .. ' is not an event entry') end
  -- A held alert was never posted: its hand-over shows it as it is then.
  local held = redis.call('HGET', e.rec, 'held')
  if not held then redis.call('XADD', KEYS[2], '*', 'e', reply) end
  redis.call('HSET', e.rec, 'resolved', '0', 'last', int(now), 'eb', int(now), 'esc', 0, 'escn', 0)
  redis.call('HDEL', e.rec, 'ack_by', 'ack_src', 'ack_at', 'lack', 'rat')
  redis.call('HINCRBY', e.rec, 'reopened', 1)
  if held then redis.call('HDEL', e.rec, 'eb') end  -- its escalation counts from its post (settle.lua)
  touch(e.rec)
  if held then redis.call('PERSIST', e.rec) else redis.call('PEXPIRE', e.rec, math.ceil(longest / 1000)) end
  opened(e.rec, redis.call('HGET', e.rec, 'first') or int(now), longest)
  redis.call('HINCRBY', KEYS[3], 'reopened', 1)
end

-- An event with a dedup_key whose alert is known: a repeat, or the alert's resolution.
local function known_alert(e)
  local first, fired, resolved = unpack(redis.call('HMGET', e.rec, 'id', 'fired', 'resolved'))
  if not first then return nil end
  if e.mode == 1 and fired == '1' and resolved == '1' then
    e.reopens = first  -- the limits decide, as for a new event
    return nil
  elseif e.mode == 1 and fired == '1' then
    redis.call('HINCRBY', e.rec, 'n', 1)
    redis.call('HSET', e.rec, 'last', int(now))
    touch(e.rec)
  elseif e.mode == 2 and resolved == '1' then
    -- a repeat of the resolution: nothing changes
  elseif e.mode == 2 and fired == '1' then
    redis.call('HSET', e.rec, 'resolved', '1', 'rat', int(now))  -- 'last' stays the last firing event's time
    touch(e.rec)
    closed(e.rec)
    redis.call('INCR', EPOCH)  -- replicas that know this alert firing must forget it
    -- A held alert's resolution posts nothing (nothing was posted): its hand-over counts it.
    if not redis.call('HGET', e.rec, 'held') then redis.call('XADD', KEYS[2], '*', 'e', e.reply) end
    redis.call('HINCRBY', KEYS[3], 'resolved', 1)
    return {'resolved', first, '', 0, 0, 0, 0}
  else
    return nil  -- the other status was never admitted: the limits decide
  end
  redis.call('HINCRBY', KEYS[3], 'duplicate', 1)
  return {'duplicate', first, '', 0, 0, 0, 0}
end

-- Repeats decided on a replica ------------------------------------------------------
-- A replica that knows an alert firing answers its firing repeats 'duplicate' itself and
-- sends them here in groups: N repeats, the last at T. Applied as the store would have
-- applied each: counted as duplicates, the record's n and last, one edit of its message.
-- A record that is gone or holds another alert (its first id differs) is only counted.
-- The epoch returned with every reply tells replicas when what they know may be out of
-- date (they read it no other way: see notifier/admission/known.py).
local function apply_repeats(at_, k_)
  local count = tonumber(ARGV[at_])
  at_ = at_ + 1
  for _ = 1, count do
    local rec, first, n, last = KEYS[k_], ARGV[at_], tonumber(ARGV[at_ + 1]), math.min(tonumber(ARGV[at_ + 2]), now)
    redis.call('HINCRBY', KEYS[3], 'duplicate', n)
    if redis.call('HGET', rec, 'id') == first then
      redis.call('HINCRBY', rec, 'n', n)
      if last > tonumber(redis.call('HGET', rec, 'last') or '0') then redis.call('HSET', rec, 'last', int(last)) end
      touch(rec)
    end
    at_, k_ = at_ + 3, k_ + 1
  end
  return at_, k_
end

-- How long the record of a firing event's alert lives on, when the alert is firing after it.
local function life_of(e, outcome)
  if e.mode ~= 1 or (outcome ~= 'accepted' and outcome ~= 'reopened' and outcome ~= 'duplicate') then return 0 end
  return math.max(0, redis.call('PTTL', e.rec)) * 1000
end
-- --------------------------------------------------------------------------------------

local function decide(e)
  local cat_rules, cat_longest, next_at = read_rules(e.rules_at)
  local answer = e.mode > 0 and known_alert(e)
  if answer then return answer, next_at end
  local state = category_state(e.cat_key, cat_rules, cat_longest)
  local gw, grule = global_wait(e.class)
  local cw, crule = category_wait(e.cat_key, state, e.cat_until)
  if gw == 0 and cw == 0 and e.reopens then
    reopen(e, e.class, state, cat_longest)
    return {'reopened', e.reopens, '', 0, 0, 0, 0}, next_at
  elseif gw == 0 and cw == 0 then
    admit(e, e.class, state, cat_longest)
    return {'accepted', e.id, '', 0, 0, 0, 0}, next_at
  end
  local level = cw > gw and 'category' or 'global'
  count_drop(e.category, level, e.sup_key, e.channel, 1, e.held)
  local outcome = 'dropped'
  if shadow then
    outcome = 'shadow'
    redis.call('XADD', KEYS[2], '*', 'e', e.entry)
  end
  return {outcome, e.id, level, gw, grule, cw, crule}, next_at
end

local k = 14 + K
for _ = 1, groups do
  local held = held_in(ARGV[at + 1], ARGV[at + 4], tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6]), ARGV[at + 7])
  count_drop(ARGV[at], ARGV[at + 2], KEYS[k], ARGV[at + 1], tonumber(ARGV[at + 3]), held)
  at, k = at + 8, k + 1
end
at, k = apply_repeats(at, k)

local results = {}
while at <= #ARGV do
  local e = {id = ARGV[at], category = ARGV[at + 1], channel = ARGV[at + 2], class = tonumber(ARGV[at + 3]),
             mode = tonumber(ARGV[at + 4]), entry = ARGV[at + 9],
             cat_key = KEYS[k], rec = KEYS[k + 1], sup_key = KEYS[k + 2]}
  e.held = held_in(e.channel, ARGV[at + 5], tonumber(ARGV[at + 6]), tonumber(ARGV[at + 7]), ARGV[at + 8])
  at = at + 10
  if e.mode == 2 then e.reply, at = ARGV[at], at + 1 end
  e.cat_until, e.rules_at = tonumber(ARGV[at]), at + 1
  local result
  result, at = decide(e)
  result[8] = life_of(e, result[1])
  results[#results + 1] = result
  k = k + 3
end
results[#results + 1] = epoch_at_start
return results

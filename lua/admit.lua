-- admit.lua: admission through every level of the limit tree for a batch of events, in order.
-- It starts with lua/buckets.lua (the sliding logs of one level value, reserves included)
-- and lua/counts.lua (the stats of outcomes).
--
-- Each event is checked against every rule of its value at every level (its bucket
-- there), for its class at that level. Only when every level admits it is it added to
-- every bucket, its alert recorded and its outbox entry appended, so admission and
-- queueing are one atomic step. A refused event changes no log: it only bumps the drop
-- counters and the per-channel digest of suppressed events.
--
-- KEYS[1] outbox (stream)          KEYS[2] stats (hash)
-- KEYS[3] categories named (set)   KEYS[4] digests due (zset: channel -> due time in us)
-- KEYS[5] override version (string)  KEYS[6] edits due (zset: record key -> since, us)
-- KEYS[7] open alerts (zset: record key -> first seen, us), KEYS[8] their ends (zset:
--   record key -> end of the record's window, us), KEYS[9] the index of dedup_keys (hash:
--   the record key's last 32 characters -> record key); written here, trimmed by
--   timers.lua as records expire
-- KEYS[10] the (channel, window) pairs holding anything (set of pair ids); a pair's
--   held store is 4 keys named after it (see held_in; same slot): its summary (hash:
--   window, channel, start, end, since, n held, dropped), its counts per category (hash,
--   capped like digests), its latest plain events (list of entries, newest first, at most
--   LATEST) and its held alerts (set of record keys). handover.lua empties it.
-- KEYS[11] the alert epoch (string, a counter): bumped whenever a firing alert stops
--   firing here (a resolution), so replicas that answer repeats themselves forget
--   what they knew (see "Repeats decided on a replica" below)
-- KEYS[12 .. 10+N] per level below the root, the values its stats name (set, capped)
-- then per bucket, its keys (buckets.lua); per group of refusals, 1 key: the suppressed
--   counts (hash) of its channel; per group of repeats, 1 key: the alert's record; per
--   event, 2 keys: alert record (hash; any key of the slot when the event has no
--   dedup_key), suppressed counts of its channel
--
-- An alert's record (for as long as its alert window) holds: id (its
-- first event), fired/resolved (1/0: an event of that status was admitted), n
-- (times seen), first and last (us), ver (changes), shown (the version its message
-- shows), entry (its outbox entry id), e (that entry); reopened (times), rat (when
-- it was resolved, us), eb (escalation counts from then, us); held (the pair id of the
-- window holding its first post, until handover.lua posts it) and ttl (its lifetime,
-- us: a held record lives until its hand-over); settle.lua adds cid
-- and ts, the message's identity in Slack; ack.lua ack_by, ack_src, ack_at; timers.lua
-- esc (the next escalation step, from 0) and escn (steps posted).
--
-- A front-door message with a gateway ts (mode 3) has a record of its ts instead of an
-- alert's (the event's record key): id, entry, ver (1) and shown (0) when admitted; id and
-- held (the pair id) when a window held it; r (the refusing level's name) when refused.
-- Replies and updates naming the ts read it; settle.lua adds cid and ts, update.lua m.
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
-- ARGV[6] value cap: how many categories (and values of each level) stats and digests
--   name (0 = all), ARGV[7] edits (1/0): repeats and resolutions edit the posted message
-- ARGV[8] N, the number of levels, then their N names, root first
-- then B, the number of buckets, and each bucket's arguments (buckets.lua)
-- then R, the number of groups of refusals a replica decided itself (a level was
--   known full), and per group: category, channel, refusing level (1..N), count, hold
--   (4 values, below), then its values at the N - 1 levels below the root.
--   Only counted (in the held summary when the window holds, else in the digest).
-- then D, the number of groups of repeats a replica answered 'duplicate' itself, and
--   per group: the alert's first event id, count, time of the last one (us)
-- then per event: id, category, channel, mode (0 = no dedup_key, 1 = firing, 2 =
--   resolved, 3 = a front-door message with a gateway ts), hold: the window of its channel in force or next (name, '' = none; start
--   us; end us; the pair id of (channel, window, start), Keys.held_pair), held when
--   start <= now < end by this clock (an admitted event then goes to the held store, not
--   the outbox), outbox entry (notifier/outbox.py JSON), for mode 2 its entry as a reply,
--   its alert window (us: how long its record lives; for mode 3, the gateway ts record's), then per
--   level: its bucket (1..B)
--   and its class there (0 = none, else 1..K of that bucket)
--
-- Returns {'expired'} or {'stale', version} when nothing was done; else one entry
--   per event, none per group of refusals or repeats: {outcome, id, level, life, then
--   per level: wait in us, rule index}, then the alert epoch as it was when the call
--   began (an integer). outcome is 'accepted', 'dropped', 'duplicate',
--   'resolved' or 'reopened' (id is then the alert's first event's), or 'shadow' (would be
--   dropped, admitted in shadow mode); level is the refusing level (1..N, 0 = none), the
--   one that stays full longest (the upper one on a tie); a level's wait is how long it
--   stays full for this event (0 when it has room): the time until it would be admitted
--   if nothing else were; rule is the rule (from 1) that stays full longest there. A
--   duplicate or a resolution carries no waits. life is, for a firing event whose alert
--   is firing after it (accepted, reopened, duplicate), how long its record lives on
--   (us), else 0.

local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then return {'expired'} end
local version = redis.call('GET', KEYS[5]) or '0'
local lapse = tonumber(ARGV[3])
if version ~= ARGV[2] or (lapse > 0 and now >= lapse) then return {'stale', version} end

local digest_us, shadow = tonumber(ARGV[4]), ARGV[5] == '1'
local cap, edits = tonumber(ARGV[6]), ARGV[7] == '1'
local STATS, NAMED, DIGESTS, EDITS = KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local N = tonumber(ARGV[8])
local levels = {}  -- level -> its name
for l = 1, N do levels[l] = ARGV[8 + l] end
local at, k = 9 + N, 11 + N

local buckets = {}
local B = tonumber(ARGV[at])
at = at + 1
for i = 1, B do buckets[i], at, k = read_bucket(at, k) end

local sets = {}
for l = 2, N do sets[l] = KEYS[10 + l] end
local count_outcome = counter(STATS, NAMED, sets, levels, cap)

local HELD, LATEST = KEYS[10], 5  -- LATEST: the plain events a hand-over quotes

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

-- A refusal by level number `level`: counted, and told in the digest (or the hand-over).
local function count_drop(category, values, level, sup_key, channel, n, held)
  count_outcome('dropped', category, values, n)
  redis.call('HINCRBY', STATS, 'dropped_' .. levels[level], n)
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
    redis.call('ZADD', DIGESTS, 'NX', int(now + digest_us), channel)
  end
end

local OUTBOX, OPEN, ENDS, INDEX = KEYS[1], KEYS[7], KEYS[8], KEYS[9]
local EPOCH = KEYS[11]
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
  if edits and redis.call('HEXISTS', rec, 'ts') == 1 then redis.call('ZADD', EDITS, 'NX', int(now), rec) end
end

-- Counts an admission at every level and in the stats; the caller queues what it posts.
local function count_admission(e)
  for l = 1, N do bucket_add(e.buckets[l], e.classes[l], e.id) end
  count_outcome('accepted', e.category, e.values, 1)
end

-- What became of a front-door message, under its gateway ts (mode 3), for as long as e.window.
local function note_sent(e, fields)
  redis.call('HSET', e.rec, unpack(fields))
  redis.call('PEXPIRE', e.rec, math.ceil(e.window / 1000))
end

-- An admitted event of a held channel: counted in the held store instead of posted.
local function hold(e, h)
  opened_store(h)
  redis.call('HINCRBY', h.sum, 'n', 1)
  local field = e.category
  if cap > 0 and redis.call('HEXISTS', h.cats, field) == 0 and redis.call('HLEN', h.cats) >= cap then
    field = '(other)'
  end
  redis.call('HINCRBY', h.cats, field, 1)
  if e.mode == 0 or e.mode == 3 then  -- only counted, the latest few quoted: the store stays bounded
    redis.call('LPUSH', h.latest, e.entry)
    redis.call('LTRIM', h.latest, 0, LATEST - 1)
    if e.mode == 3 then note_sent(e, {'id', e.id, 'held', h.pid}) end
    return
  end
  record_admitted(e.rec, e, '', e.window)
  redis.call('HSET', e.rec, 'held', h.pid, 'ttl', int(e.window))
  redis.call('PERSIST', e.rec)  -- kept until its hand-over, however long the window
  if e.mode == 1 then redis.call('ZADD', ENDS, int(h.finish + e.window), e.rec) end
  redis.call('SADD', h.alerts, e.rec)
end

local function queue(e)
  local stream_id = redis.call('XADD', OUTBOX, '*', 'e', e.entry)
  if e.mode == 3 then note_sent(e, {'id', e.id, 'entry', stream_id, 'ver', 1, 'shown', 0}) end
  return stream_id
end

local function admit(e)
  count_admission(e)
  if e.held then return hold(e, e.held) end
  local stream_id = queue(e)
  if e.mode == 1 or e.mode == 2 then record_admitted(e.rec, e, stream_id, e.window) end
end

-- A resolved alert fires again: one message for its whole life, a reply in its thread.
local function reopen(e)
  count_admission(e)
  local reply, swapped = string.gsub(e.entry, '^{"k":"event"', '{"k":"reopen"', 1)
  if swapped ~= 1 then error('admit.lua: the entry of ' .. e.id .. ' is not an event entry') end
  -- A held alert was never posted: its hand-over shows it as it is then.
  local held = redis.call('HGET', e.rec, 'held')
  if not held then redis.call('XADD', OUTBOX, '*', 'e', reply) end
  redis.call('HSET', e.rec, 'resolved', '0', 'last', int(now), 'eb', int(now), 'esc', 0, 'escn', 0)
  redis.call('HDEL', e.rec, 'ack_by', 'ack_src', 'ack_at', 'lack', 'rat')
  redis.call('HINCRBY', e.rec, 'reopened', 1)
  if held then redis.call('HDEL', e.rec, 'eb') end  -- its escalation counts from its post (settle.lua)
  touch(e.rec)
  if held then redis.call('PERSIST', e.rec) else redis.call('PEXPIRE', e.rec, math.ceil(e.window / 1000)) end
  opened(e.rec, redis.call('HGET', e.rec, 'first') or int(now), e.window)
  redis.call('HINCRBY', STATS, 'reopened', 1)
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
    if not redis.call('HGET', e.rec, 'held') then redis.call('XADD', OUTBOX, '*', 'e', e.reply) end
    redis.call('HINCRBY', STATS, 'resolved', 1)
    return {'resolved', first, 0, 0}
  else
    return nil  -- the other status was never admitted: the limits decide
  end
  redis.call('HINCRBY', STATS, 'duplicate', 1)
  return {'duplicate', first, 0, 0}
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
    redis.call('HINCRBY', STATS, 'duplicate', n)
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

-- For each level, how long it refuses the event; admitted when none does, else refused
-- by the level that stays full longest (the upper one on a tie).
local function decide(e)
  local answer = (e.mode == 1 or e.mode == 2) and known_alert(e)
  if answer then return answer end
  local result, refusing, longest = {'', e.id, 0, 0}, 0, 0
  for l = 1, N do
    local wait, rule = bucket_wait(e.buckets[l], e.classes[l])
    result[3 + 2 * l], result[4 + 2 * l] = wait, rule
    if wait > longest then refusing, longest = l, wait end
  end
  if refusing == 0 and e.reopens then
    reopen(e)
    result[1], result[2] = 'reopened', e.reopens
  elseif refusing == 0 then
    admit(e)
    result[1] = 'accepted'
  else
    count_drop(e.category, e.values, refusing, e.sup_key, e.channel, 1, e.held)
    result[1], result[3] = shadow and 'shadow' or 'dropped', refusing
    if shadow then queue(e) elseif e.mode == 3 then note_sent(e, {'r', levels[refusing]}) end
  end
  return result
end

-- Groups of refusals a replica decided itself: only counted.
for _ = 1, tonumber(ARGV[at]) do
  local category, channel, level, n = ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  local held = held_in(channel, ARGV[at + 5], tonumber(ARGV[at + 6]), tonumber(ARGV[at + 7]), ARGV[at + 8])
  local values = {}
  for l = 2, N do values[l - 1] = ARGV[at + 7 + l] end
  count_drop(category, values, level, KEYS[k], channel, n, held)
  at, k = at + 7 + N, k + 1
end
at, k = apply_repeats(at + 1, k)

local results = {}
while at <= #ARGV do
  local e = {id = ARGV[at], category = ARGV[at + 1], channel = ARGV[at + 2], mode = tonumber(ARGV[at + 3]),
             entry = ARGV[at + 8], rec = KEYS[k], sup_key = KEYS[k + 1], buckets = {}, classes = {}, values = {}}
  e.held = held_in(e.channel, ARGV[at + 4], tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6]), ARGV[at + 7])
  at = at + 9
  if e.mode == 2 then e.reply, at = ARGV[at], at + 1 end
  e.window, at = tonumber(ARGV[at]), at + 1
  for l = 1, N do
    e.buckets[l], e.classes[l] = buckets[tonumber(ARGV[at])], tonumber(ARGV[at + 1])
    if l > 1 then e.values[l - 1] = e.buckets[l].value end
    at = at + 2
  end
  local result = decide(e)
  result[4] = life_of(e, result[1])
  results[#results + 1] = result
  k = k + 2
end
results[#results + 1] = epoch_at_start
return results

-- admit.lua: hierarchical sliding-log admission for a batch of events, in order.
--
-- Each event is checked against every rule of the global level and of its
-- category level. Only when all rules hold is it added to both logs, remembered
-- under its dedup key and appended to the outbox, so admission and queueing are
-- one atomic step. A refused event changes no log: it only bumps the drop
-- counters and the per-channel digest of suppressed events.
--
-- KEYS[1] global log (zset: member = event id, score = admission time in us)
-- KEYS[2] outbox (stream)          KEYS[3] stats (hash)
-- KEYS[4] categories seen (set)    KEYS[5] digests due (zset: channel -> due time in us)
-- then per group of refusals, 1 key: the suppressed counts (hash) of its channel
-- then per event, 3 keys: category log (zset), dedup key (string), suppressed counts (hash)
--
-- ARGV[1] G, the number of global rules, then G pairs: limit, window in us
-- then: digest interval in us (0 = no digests), shadow mode (1/0)
-- then R, the number of groups of refusals a replica already decided itself
--   (the level was known full), and per group: category, channel, level
--   ('global'/'category'), count. They are only counted, a group at once.
-- then per event: id, category, channel, dedup (1/0), outbox entry (the JSON of
--   notifier/outbox.py, appended as field 'e'), C (number of category rules),
--   then C pairs: limit, window in us
--
-- Returns one entry per event, none per group of refusals: {outcome, id, level,
--   global wait in us, global rule index, category wait in us, category rule
--   index}; outcome is 'accepted',
--   'dropped', 'duplicate' (id is then the first event's) or 'shadow' (would be
--   dropped, admitted in shadow mode); level is the refusing level, the one that
--   stays full longer (global on a tie); a level's wait is how long its fullest
--   rule (by index) stays at its limit, 0 when the level has room.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Integers go to Redis as exact decimal strings (plain tostring loses digits).
local function int(x) return string.format('%.0f', x) end

local function read_rules(argv, at)
  local n, rules, longest = tonumber(argv[at]), {}, 0
  for i = 1, n do
    local limit, window = tonumber(argv[at + 2 * i - 1]), tonumber(argv[at + 2 * i])
    rules[i] = {limit, window}
    if window > longest then longest = window end
  end
  return rules, longest, at + 2 * n + 1
end

-- How long the log stays full: for every rule at its limit, the time until
-- enough of its entries leave the window; the longest of those, and its rule.
local function level_wait(key, rules)
  local wait, worst = 0, 0
  for i = 1, #rules do
    local limit, window = rules[i][1], rules[i][2]
    local lower = '(' .. int(now - window)
    local used = redis.call('ZCOUNT', key, lower, '+inf')
    if used >= limit then
      local w = window  -- a 0 limit (a muted level) never frees a slot: a window is the hint
      if limit > 0 then
        local e = redis.call('ZRANGEBYSCORE', key, lower, '+inf', 'WITHSCORES', 'LIMIT', used - limit, 1)
        w = tonumber(e[2]) + window - now
      end
      if w > wait then wait, worst = w, i end
    end
  end
  return wait, worst
end

local function trim(key, longest)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
end

local global_rules, global_longest, at = read_rules(ARGV, 1)
local digest_us = tonumber(ARGV[at])
local shadow = ARGV[at + 1] == '1'
local groups = tonumber(ARGV[at + 2])
at = at + 3
trim(KEYS[1], global_longest)

local function count_drop(category, level, sup_key, channel, n)
  redis.call('HINCRBY', KEYS[3], 'dropped', n)
  redis.call('HINCRBY', KEYS[3], 'dropped_' .. level, n)
  redis.call('HINCRBY', KEYS[3], 'dropped:' .. category, n)
  if digest_us > 0 and not shadow then
    redis.call('HINCRBY', sup_key, category, n)
    redis.call('HSETNX', sup_key, '_since', int(now))
    redis.call('ZADD', KEYS[5], 'NX', int(now + digest_us), channel)
  end
end

local function admit(id, category, channel, payload, cat_key, dedup_key, dedup, cat_longest)
  redis.call('ZADD', KEYS[1], int(now), id)
  redis.call('ZADD', cat_key, int(now), id)
  redis.call('PEXPIRE', KEYS[1], math.ceil(global_longest / 1000))
  redis.call('PEXPIRE', cat_key, math.ceil(cat_longest / 1000))
  if dedup then
    redis.call('SET', dedup_key, id, 'PX', math.ceil(cat_longest / 1000))
  end
  redis.call('XADD', KEYS[2], '*', 'e', payload)
  redis.call('HINCRBY', KEYS[3], 'accepted', 1)
  redis.call('HINCRBY', KEYS[3], 'accepted:' .. category, 1)
end

local k = 6
for _ = 1, groups do
  local category = ARGV[at]
  redis.call('SADD', KEYS[4], category)
  count_drop(category, ARGV[at + 2], KEYS[k], ARGV[at + 1], tonumber(ARGV[at + 3]))
  at, k = at + 4, k + 1
end

local results = {}
while at <= #ARGV do
  local id, category, channel = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local dedup, payload = ARGV[at + 3] == '1', ARGV[at + 4]
  local cat_rules, cat_longest, next_at = read_rules(ARGV, at + 5)
  local cat_key, dedup_key, sup_key = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  redis.call('SADD', KEYS[4], category)
  local first = dedup and redis.call('GET', dedup_key)
  if first then
    redis.call('HINCRBY', KEYS[3], 'duplicate', 1)
    results[#results + 1] = {'duplicate', first, '', 0, 0, 0, 0}
  else
    trim(cat_key, cat_longest)
    local gw, grule = level_wait(KEYS[1], global_rules)
    local cw, crule = level_wait(cat_key, cat_rules)
    if gw == 0 and cw == 0 then
      admit(id, category, channel, payload, cat_key, dedup_key, dedup, cat_longest)
      results[#results + 1] = {'accepted', id, '', 0, 0, 0, 0}
    else
      local level = 'global'
      if cw > gw then level = 'category' end
      count_drop(category, level, sup_key, channel, 1)
      local outcome = 'dropped'
      if shadow then
        outcome = 'shadow'
        redis.call('XADD', KEYS[2], '*', 'e', payload)
      end
      results[#results + 1] = {outcome, id, level, gw, grule, cw, crule}
    end
  end
  at = next_at
  k = k + 3
end
return results

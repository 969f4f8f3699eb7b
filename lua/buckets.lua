-- buckets.lua: the sliding logs of one value of one level of the limit tree (a bucket).
-- Not a script of its own: notifier/store/scripts.py puts it at the start of admit.lua,
-- limits.lua and restore.lua, which read their buckets with it.
--
-- A bucket's log is a zset (member = event id, score = admission time in us). When the
-- value has reserves (Fair shares), it also keeps a log per class: K classes, and the
-- events of no class. Under a rule COUNT/W, class c owns R[c] reserved slots and
-- S = COUNT - sum R is shared. An event of class c is admitted by the rule when its
-- class admitted fewer than R[c] in the last W, or else when the overflow (per class,
-- admissions above R[c], plus every event of no class) is below S. Without reserves
-- (K = 0) that is: fewer than COUNT in the last W. Counts are read once per call (one
-- clock for the whole call) and kept up to date by bucket_add.
--
-- A bucket's arguments (read_bucket): ARGV level (1..N), value, lapse of its override
--   (us, 0 = none), R, R pairs (limit, window in us), K, then K * R reserved slot counts
--   (per class, one per rule); KEYS its log, then when K > 0 the log of the events of no
--   class and the log of each class (all in the deployment's slot).
--
-- Defines: now (the store's clock, us), int(x), INF, read_bucket(at, k) -> bucket, at, k;
--   bucket_wait(b, c) -> wait in us (0: admits now), rule (1..R, 0: none);
--   bucket_add(b, c, id); bucket_rules(b, c) -> per rule {used, wait, oldest leaves in}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Integers go to Redis as exact decimal strings (plain tostring loses digits).
local function int(x) return string.format('%.0f', x) end
local INF = math.huge

local function count_in(key, window)
  return redis.call('ZCOUNT', key, '(' .. int(now - window), '+inf')
end

-- Entries of a window scored up to s (inclusive).
local function count_to(key, window, s)
  return redis.call('ZCOUNT', key, '(' .. int(now - window), int(s))
end

-- The score of the entry at 0-based position i (oldest first) of a window, or nil.
local function nth(key, window, i)
  local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(now - window), '+inf', 'WITHSCORES', 'LIMIT', i, 1)
  return e[2] and tonumber(e[2])
end

local function read_bucket(at, k)
  local b = {level = tonumber(ARGV[at]), value = ARGV[at + 1], lapse = tonumber(ARGV[at + 2]), log = KEYS[k],
             rules = {}, longest = 0, reserved = {}, shared = {}, logs = {}}
  local R = tonumber(ARGV[at + 3])
  at = at + 4
  for r = 1, R do
    local limit, window = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
    b.rules[r], b.shared[r] = {limit, window}, limit
    if window > b.longest then b.longest = window end
    at = at + 2
  end
  b.K = tonumber(ARGV[at])
  at, k = at + 1, k + 1
  for c = 1, b.K do
    b.reserved[c] = {}
    for r = 1, R do
      b.reserved[c][r] = tonumber(ARGV[at])
      b.shared[r] = b.shared[r] - b.reserved[c][r]
      at = at + 1
    end
  end
  if b.K > 0 then
    for c = 0, b.K do b.logs[c] = KEYS[k + c] end
    k = k + b.K + 1
  end
  return b, at, k
end

-- Reads the bucket's counts, once per call: per rule all entries (total), per class
-- (used), of no class (plain), and the overflow beyond what the reserves cover (over).
local function load(b)
  if b.total then return end
  b.total, b.over, b.plain, b.used, b.waits = {}, {}, {}, {}, {}
  for c = 1, b.K do b.used[c] = {} end
  for r = 1, #b.rules do
    local window = b.rules[r][2]
    b.total[r] = count_in(b.log, window)
    b.over[r], b.plain[r] = b.total[r], b.total[r]
    if b.K > 0 then
      b.plain[r] = count_in(b.logs[0], window)
      for c = 1, b.K do
        b.used[c][r] = count_in(b.logs[c], window)
        b.over[r] = b.over[r] - math.min(b.used[c][r], b.reserved[c][r])
      end
    end
  end
end

-- The time of the k-th (from 1) departure that lowers the overflow of rule r: an entry
-- of no class, or one of the oldest used - reserved entries of a class over its reserve.
local function kth_departure(b, r, k)
  local window = b.rules[r][2]
  if b.K == 0 then return nth(b.log, window, k - 1) end
  local classed = 0
  for c = 1, b.K do classed = classed + b.used[c][r] end
  if b.total[r] == classed + b.plain[r] and k <= 32 then
    -- Every entry has its class log (the usual case): merge the first k of each source.
    local scores = {}
    for c = 0, b.K do
      local n = c == 0 and k or math.min(k, b.used[c][r] - b.reserved[c][r])
      if n > 0 then
        local e = redis.call('ZRANGEBYSCORE', b.logs[c], '(' .. int(now - window), '+inf', 'WITHSCORES', 'LIMIT', 0, n)
        for i = 2, #e, 2 do scores[#scores + 1] = tonumber(e[i]) end
      end
    end
    table.sort(scores)
    return scores[k]
  end
  -- Else (entries admitted before these reserves were set) count departures by time:
  -- all entries, less those of classes, plus each class's excess over its reserve.
  local function departed(s)
    local n = count_to(b.log, window, s)
    for c = 1, b.K do
      local in_class = count_to(b.logs[c], window, s)
      n = n - in_class + math.min(math.max(0, b.used[c][r] - b.reserved[c][r]), in_class)
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
local function rule_wait(b, r, c)
  local window = b.rules[r][2]
  if c > 0 and b.used[c][r] < b.reserved[c][r] then return 0 end
  if b.over[r] < b.shared[r] then return 0 end
  local wait = INF
  if c > 0 and b.reserved[c][r] > 0 then
    wait = nth(b.logs[c], window, b.used[c][r] - b.reserved[c][r]) + window - now
  end
  if b.shared[r] > 0 then
    wait = math.min(wait, kth_departure(b, r, b.over[r] - b.shared[r] + 1) + window - now)
  end
  if wait == INF then wait = window end  -- nothing ever frees a slot (a mute): a window is the hint
  return wait
end

-- How long the bucket refuses an event of class c, and the rule that stays full longest;
-- kept until the next admission into the bucket changes it.
local function bucket_wait(b, c)
  load(b)
  local cached = b.waits[c]
  if cached then return cached[1], cached[2] end
  local wait, worst = 0, 0
  for r = 1, #b.rules do
    local w = rule_wait(b, r, c)
    if w > wait then wait, worst = w, r end
  end
  if wait > 0 and b.lapse > 0 and wait > b.lapse - now then wait = b.lapse - now end
  b.waits[c] = {wait, worst}
  return wait, worst
end

local trimmed = {}  -- logs trimmed by this call: old entries go only where one is added
local function add(key, id, longest)
  if not trimmed[key] then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
    trimmed[key] = true
  end
  redis.call('ZADD', key, int(now), id)
  redis.call('PEXPIRE', key, math.ceil(longest / 1000))
end

-- Counts an admission of class c: in the bucket's log (and its class's), and in the counts.
local function bucket_add(b, c, id)
  load(b)
  add(b.log, id, b.longest)
  if b.K > 0 then add(b.logs[c], id, b.longest) end
  for r = 1, #b.rules do
    b.total[r] = b.total[r] + 1
    if c == 0 then
      b.over[r], b.plain[r] = b.over[r] + 1, b.plain[r] + 1
    else
      if b.used[c][r] >= b.reserved[c][r] then b.over[r] = b.over[r] + 1 end
      b.used[c][r] = b.used[c][r] + 1
    end
  end
  b.waits = {}
end

-- pace.lua: the send slots of one channel (or edit budget), shared by the fleet; hands out the next one.
--
-- The channel's last sends are a list of their slots, newest first. Under each rule
-- COUNT/WINDOW the next slot is no earlier than the COUNT-th last slot plus the
-- window (widened by the caller's margin): a sliding log, so a burst of COUNT goes
-- at once and every window holds at most COUNT. The slot is also no earlier than
-- now, nor than the end of a cooldown (a 429's Retry-After) another replica recorded.
-- Every replica calls this before each send, so together they keep the pace.
--
-- KEYS[1] the channel's last slots (list of times in us, newest first)
-- KEYS[2] cooldown of the channel, KEYS[3] cooldown of its whole destination
--         (strings whose TTL is the time left)
-- KEYS[4], KEYS[5] (optional) the slots and cooldown of the same channel under its other
--         name (a Slack channel's name, once its id is known): replicas that do not know the
--         id yet pace under the name, so the id's slots keep clear of those, and each slot is
--         written there too, for those replicas to keep clear of it in turn
-- ARGV    pairs COUNT, WINDOW_US: the rules, each window already widened by the caller
--
-- Returns the time to wait before sending, in us.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local slot, longest, keep = now, 0, 1
for i = 1, #ARGV, 2 do
  local count, window = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  for _, key in ipairs({KEYS[1], KEYS[4]}) do
    local before = redis.call('LINDEX', key, count - 1)
    if before then slot = math.max(slot, tonumber(before) + window) end
  end
  longest, keep = math.max(longest, window), math.max(keep, count)
end
for _, i in ipairs({2, 3, 5}) do
  local left = KEYS[i] and redis.call('PTTL', KEYS[i]) or 0
  if left > 0 then slot = math.max(slot, now + left * 1000) end
end
for _, key in ipairs({KEYS[1], KEYS[4]}) do
  redis.call('LPUSH', key, string.format('%.0f', slot))
  redis.call('LTRIM', key, 0, keep - 1)
  redis.call('PEXPIRE', key, math.ceil((slot - now + longest) / 1000) + 1000)
end
return slot - now

-- pace.lua: leaky bucket per Slack channel; hands the caller the next free send slot.
--
-- The slot is the later of: now, the channel's last slot plus the spacing, and
-- the end of any Slack cooldown (429 Retry-After) another replica recorded.
-- Every replica calls this before each send, so together they keep the pace.
--
-- KEYS[1] last slot of the channel (string, time in us)
-- KEYS[2] cooldown of the channel, KEYS[3] cooldown of the whole workspace
--         (strings whose TTL is the time left)
-- ARGV[1] spacing between two messages of the channel, in us (the worker makes it
--         a little wider than the configured rate, see SPACING_MARGIN)
--
-- Returns the time to wait before sending, in us.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local spacing = tonumber(ARGV[1])

local slot = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0') + spacing)
for i = 2, 3 do
  local left = redis.call('PTTL', KEYS[i])
  if left > 0 then slot = math.max(slot, now + left * 1000) end
end
redis.call('SET', KEYS[1], string.format('%.0f', slot), 'PX', math.ceil((slot - now + spacing) / 1000) + 1000)
return slot - now

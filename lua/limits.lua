-- limits.lua: read-only view of sliding logs: per rule, used and when a slot frees.
--
-- KEYS[i] a level's log (zset)
-- ARGV: for each key, R (number of rules) then R pairs: limit, window in us
--
-- Returns, per key, per rule: {used, wait in us until a slot is free (0 when
-- one is), wait in us until the oldest entry in the window leaves (0 if empty)}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out, at = {}, 1
for k = 1, #KEYS do
  local n = tonumber(ARGV[at])
  for i = 1, n do
    local limit, window = tonumber(ARGV[at + 2 * i - 1]), tonumber(ARGV[at + 2 * i])
    local lower = '(' .. string.format('%.0f', now - window)
    local used = redis.call('ZCOUNT', KEYS[k], lower, '+inf')
    local free, oldest = 0, 0
    if used > 0 then
      local first = redis.call('ZRANGEBYSCORE', KEYS[k], lower, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      oldest = tonumber(first[2]) + window - now
    end
    if used >= limit then
      free = window  -- a 0 limit never frees a slot (as in admit.lua)
      if limit > 0 then
        local e = redis.call('ZRANGEBYSCORE', KEYS[k], lower, '+inf', 'WITHSCORES', 'LIMIT', used - limit, 1)
        free = tonumber(e[2]) + window - now
      end
    end
    out[#out + 1] = {used, free, oldest}
  end
  at = at + 2 * n + 1
end
return out

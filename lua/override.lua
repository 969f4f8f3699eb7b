-- override.lua: put or remove a run-time override of a level's rules, for the whole fleet.
--
-- Every change bumps the override version; admit.lua refuses to decide under an
-- older version, so a replica that has not read the change yet never applies the
-- old rules once the change is answered. An override with an end lapses by itself
-- at that moment of the store's clock (admit.lua is told when, and checks).
--
-- KEYS[1] overrides (hash: level value -> JSON {"rules", "until": us as a string or "",
--   "by", "at": us as a string})
-- KEYS[2] override version (string, a counter)
-- ARGV[1] 'put' or 'delete', ARGV[2] the level value: the root's name, or LEVEL=VALUE,
-- for 'put': ARGV[3] rules as written, ARGV[4] duration in ms (0 = until removed),
--   ARGV[5] who made it
--
-- Returns for 'put' {until in us ('' = none), version, the override it replaced ('' = none)};
-- for 'delete' {1 when an override was in force (and is now removed), else 0, version, the
-- removed override ('' = none)}. The replaced or removed one is for the audit log's "before".

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x) return string.format('%.0f', x) end

-- An override whose end has passed is none: forget it.
local function in_force(level)
  local raw = redis.call('HGET', KEYS[1], level)
  if not raw then return false end
  local until_us = cjson.decode(raw)['until']
  if until_us ~= '' and tonumber(until_us) <= now then
    redis.call('HDEL', KEYS[1], level)
    return false
  end
  return true
end

if ARGV[1] == 'put' then
  local all = redis.call('HKEYS', KEYS[1])
  for i = 1, #all do in_force(all[i]) end  -- lapsed ones go: the hash holds what is in force
  local for_ms = tonumber(ARGV[4])
  local until_us = for_ms > 0 and int(now + for_ms * 1000) or ''
  local before = redis.call('HGET', KEYS[1], ARGV[2]) or ''
  redis.call('HSET', KEYS[1], ARGV[2],
    cjson.encode({rules = ARGV[3], ['until'] = until_us, by = ARGV[5], at = int(now)}))
  return {until_us, redis.call('INCR', KEYS[2]), before}
end
if not in_force(ARGV[2]) then return {0, redis.call('GET', KEYS[2]) or '0', ''} end
local removed = redis.call('HGET', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[1], ARGV[2])
return {1, redis.call('INCR', KEYS[2]), removed}

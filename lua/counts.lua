-- counts.lua: the shared counters of admitted and refused events (the stats hash).
-- Not a script of its own: notifier/store/scripts.py puts it at the start of admit.lua
-- and restore.lua.
--
-- Every outcome is counted in all ('accepted' or 'dropped'), per category
-- ('accepted:<category>') and per value of every level below the root
-- ('level:<level>:accepted:<value>'). Categories and values come from clients: past
-- `cap` of them (0 = no cap) in a set, the rest are counted under '(other)'.
--
-- Defines: counter(stats, categories, sets, levels, cap) -> count(outcome, category, values, n)
--   stats: the stats hash; categories: the set of categories named; sets[l]: the set of values
--   named of level l (2..N), levels[l] its name; values[l - 1]: the event's value at level l.

local function counter(stats, categories, sets, levels, cap)
  local named = {}  -- set -> value -> the name it is counted under, for this call
  local function name_in(set, value)
    local cache = named[set]
    if not cache then cache = {}; named[set] = cache end
    local name = cache[value]
    if name then return name end
    name = value
    if redis.call('SISMEMBER', set, value) == 0 then
      if cap > 0 and redis.call('SCARD', set) >= cap then name = '(other)'
      else redis.call('SADD', set, value) end
    end
    cache[value] = name
    return name
  end
  return function(outcome, category, values, n)
    redis.call('HINCRBY', stats, outcome, n)
    redis.call('HINCRBY', stats, outcome .. ':' .. name_in(categories, category), n)
    for l = 2, #levels do
      local value = name_in(sets[l], values[l - 1])
      redis.call('HINCRBY', stats, 'level:' .. levels[l] .. ':' .. outcome .. ':' .. value, n)
    end
  end
end

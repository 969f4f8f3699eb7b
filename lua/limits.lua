-- limits.lua: read-only view of level values (buckets, see lua/buckets.lua, which it
-- starts with): per rule, how many are used and when a slot frees.
--
-- KEYS and ARGV: the buckets one after the other, as buckets.lua reads them.
--
-- Returns, per bucket: {per rule {used, wait in us until a slot is free (0 when one is),
-- wait in us until the oldest entry in the window leaves (0 if empty)}, then with
-- reserves, per class, per rule: the events of that class in the window}.

local out, at, k = {}, 1, 1
while at <= #ARGV do
  local b
  b, at, k = read_bucket(at, k)
  load(b)
  local view = {}
  for r = 1, #b.rules do
    local limit, window = b.rules[r][1], b.rules[r][2]
    local used, free, oldest = b.total[r], 0, 0
    if used > 0 then oldest = nth(b.log, window, 0) + window - now end
    if used >= limit then
      free = window  -- a 0 limit never frees a slot (as in admit.lua)
      if limit > 0 then free = nth(b.log, window, used - limit) + window - now end
    end
    view[#view + 1] = {used, free, oldest}
  end
  for c = 1, b.K do
    for r = 1, #b.rules do view[#view + 1] = b.used[c][r] end
  end
  out[#out + 1] = view
end
return out

-- history.lua: the snapshot of one minute of the stats hash's outcome counters, taken once
-- for the whole fleet (store/history.py).
--
-- Every replica calls it soon after each minute starts (by the store's clock); the first
-- writes the minute's record, the others find it there and write nothing: the record is
-- the claim. It holds the cumulative counters of admitted and dropped events, in all and
-- per level value ('accepted', 'dropped', 'level:<level>:<outcome>:<value>', their number
-- capped by counts.lua's cap) and '@at', the store's time of the snapshot; the per-minute
-- counts are the differences between consecutive records. It expires, so at most one
-- hour and a few minutes of records exist.
--
-- KEYS[1] the stats hash  KEYS[2] the minute's record (hash)
-- ARGV[1] the store's time now (ms)  ARGV[2] how long the record is kept (ms)
-- Returns 1 when this call wrote the record, 0 when it was there already.

if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local all = redis.call('HGETALL', KEYS[1])
local kept = {'@at', ARGV[1]}
local function flush()
  redis.call('HSET', KEYS[2], unpack(kept))
  kept = {}
end
for i = 1, #all, 2 do
  local field = all[i]
  if field == 'accepted' or field == 'dropped' or string.sub(field, 1, 6) == 'level:' then
    kept[#kept + 1] = field
    kept[#kept + 1] = all[i + 1]
    if #kept >= 1000 then flush() end  -- unpack takes a few thousand values at most
  end
end
if #kept > 0 then flush() end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1

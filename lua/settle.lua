-- settle.lua: finish an outbox entry: delivered, or moved to the dead-letter stream.
--
-- KEYS[1] outbox (stream)  KEYS[2] dead letters (stream)  KEYS[3] attempts (hash)
-- KEYS[4] stats (hash)
-- ARGV[1] consumer group, ARGV[2] stream entry id, ARGV[3] event id,
-- ARGV[4] 'delivered' or 'dead', then for 'dead': ARGV[5] reason, and the
-- entry's fields as name, value pairs from ARGV[6] on.
--
-- Returns 1 when this call settled the entry, 0 when it was already settled
-- (another replica delivered it too: a duplicate; or, for 'dead', nothing is
-- dead-lettered since another replica settled it).

local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[3])
if ARGV[4] == 'dead' and acked == 1 then
  -- (not acked: another replica settled it meanwhile, delivered or dead; never dead-letter twice)
  local fields = {'reason', ARGV[5]}
  for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
  redis.call('XADD', KEYS[2], '*', unpack(fields))
  redis.call('HINCRBY', KEYS[4], 'dead_lettered', 1)
elseif ARGV[4] == 'dead' then
  -- already settled elsewhere: nothing to record
elseif acked == 1 then
  redis.call('HINCRBY', KEYS[4], 'delivered', 1)
else
  redis.call('HINCRBY', KEYS[4], 'delivered_again', 1)
end
return acked

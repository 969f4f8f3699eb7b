-- settle.lua: finish an outbox entry: delivered, or moved to the dead-letter stream.
--
-- KEYS[1] outbox (stream)  KEYS[2] dead letters (stream)  KEYS[3] attempts (hash)
-- KEYS[4] stats (hash)     KEYS[5] edits due (zset: record key -> since, us)
-- KEYS[6] the record of the alert the entry posted (hash; any key of the slot if none)
-- KEYS[7] escalation timers (zset: record key -> when to look, us; see timers.lua)
-- ARGV[1] consumer group, ARGV[2] stream entry id, ARGV[3] event id,
-- ARGV[4] 'delivered', 'dead' or 'folded' (a stale event summed up in its channel's folded
--   message, counted as folded: delivery/folding.py); then
--   for 'delivered': ARGV[5] channel id Slack answered, ARGV[6] the message's ts,
--     ARGV[7] the version of the record the message shows (0: not an alert's post),
--     ARGV[8] edits (1/0): a change made while it was being posted edits it now
--     ARGV[9] the offset (us) of the alert's first escalation step (0: none), and
--     ARGV[10] 'post' (the alert's message: escalation counts from now) or 'reopen'
--     (its Firing again reply: escalation counts from the reopening, admit.lua's 'eb')
--   for 'dead': ARGV[5] reason, ARGV[6] the most dead letters kept (the oldest go first), and the
--     entry's fields as name, value pairs from ARGV[7] on
--
-- Returns 1 when this call settled the entry, 0 when it was already settled
-- (another replica delivered it too: a duplicate; or, for 'dead', nothing is
-- dead-lettered since another replica settled it).

local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[3])
if ARGV[4] == 'folded' then
  if acked == 1 then redis.call('HINCRBY', KEYS[4], 'folded', 1) end
  return acked
end
if ARGV[4] == 'dead' then
  if acked == 1 then  -- (else another replica settled it meanwhile: never dead-letter twice)
    local fields = {'reason', ARGV[5]}
    for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
    redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[6], '*', unpack(fields))
    redis.call('HINCRBY', KEYS[4], 'dead_lettered', 1)
  end
  return acked
end
redis.call('HINCRBY', KEYS[4], acked == 1 and 'delivered' or 'delivered_again', 1)
local shown = tonumber(ARGV[7])
if shown > 0 and redis.call('HGET', KEYS[6], 'id') == ARGV[3] then
  -- The alert's message identity, for edits and thread replies from any replica.
  redis.call('HSET', KEYS[6], 'cid', ARGV[5], 'ts', ARGV[6], 'shown', shown)
  local ver = tonumber(redis.call('HGET', KEYS[6], 'ver') or '0')
  if ARGV[8] == '1' and ver > shown then
    local t = redis.call('TIME')
    redis.call('ZADD', KEYS[5], 'NX', t[1] .. string.format('%06d', tonumber(t[2])), KEYS[6])
  end
end
local first_step = tonumber(ARGV[9] or '0')
if acked == 1 and first_step > 0 and KEYS[6] ~= KEYS[5] and redis.call('HGET', KEYS[6], 'resolved') == '0' then
  local fresh = ARGV[10] == 'post' and redis.call('HGET', KEYS[6], 'id') == ARGV[3]
  if fresh or ARGV[10] == 'reopen' then
    local t = redis.call('TIME')
    redis.call('HSETNX', KEYS[6], 'eb', t[1] .. string.format('%06d', tonumber(t[2])))
    local base = tonumber(redis.call('HGET', KEYS[6], 'eb'))
    redis.call('ZADD', KEYS[7], string.format('%.0f', base + first_step), KEYS[6])
  end
end
return acked

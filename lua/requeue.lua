-- requeue.lua: move dead letters back into the outbox, atomically, to be delivered again.
--
-- KEYS[1] outbox (stream)  KEYS[2] dead letters (stream)  KEYS[3] stats (hash)
-- ARGV: event ids or dead-letter entry ids to requeue; none = every dead letter.
-- An entry's event id is the 'id' of its outbox entry (field 'e', notifier/outbox.py).
--
-- Each moved entry gets its original fields back (without 'reason') in a new
-- outbox entry and leaves the dead-letter stream in the same step, so it is
-- never in both streams, nor in neither.
-- Returns the event ids requeued, in dead-letter order.

local wanted = nil
if #ARGV > 0 then
  wanted = {}
  for i = 1, #ARGV do wanted[ARGV[i]] = true end
end

local moved = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do
  local fields, event_id = {}, ''
  for i = 1, #entry[2], 2 do
    local name, value = entry[2][i], entry[2][i + 1]
    if name ~= 'reason' then
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
    if name == 'e' then
      local ok, decoded = pcall(cjson.decode, value)
      if ok and type(decoded) == 'table' and decoded.id then event_id = decoded.id end
    end
  end
  if wanted == nil or wanted[event_id] or wanted[entry[1]] then
    redis.call('XADD', KEYS[1], '*', unpack(fields))
    redis.call('XDEL', KEYS[2], entry[1])
    moved[#moved + 1] = event_id
  end
end
if #moved > 0 then redis.call('HINCRBY', KEYS[3], 'requeued', #moved) end
return moved

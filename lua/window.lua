-- window.lua: open, change or end a maintenance window, for the whole fleet.
--
-- Windows live beside the overrides and share their version: every change bumps it, and
-- admit.lua refuses to decide under an older one, so once a change is answered no replica
-- holds (or posts) an event under the old windows. Times are the store's clock.
--
-- KEYS[1] windows (hash: name -> JSON {"start", "end": us as strings, "categories",
--   "channels": arrays, "note", "by", "at": us as a string; "as", "ae": the start and end
--   were announced, see announce.lua})
-- KEYS[2] override version (string, a counter; see override.lua)
-- ARGV[1] 'put' or 'end', ARGV[2] name,
-- for 'put': ARGV[3] start in us (0 = now), ARGV[4] end in us (0: start plus ARGV[9]),
--   ARGV[5] categories (JSON array), ARGV[6] channels (JSON array), ARGV[7] note, ARGV[8] who
--   made it, ARGV[9] how long it lasts in us (with an end of 0)
--
-- Returns for 'put' {'ok', start us, end us, version, the window it replaced ('' = none)} or
-- {'bad', why} (nothing changed); for 'end' {1, end us, the window before it ended} when a window
-- that had not ended is now ended (one that had not started is removed: it held nothing), else
-- {0, ''}. The replaced window is for the audit log's "before".

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x) return string.format('%.0f', x) end
local KEEP_US = 86400000000  -- an ended window is kept a day (its hand-over reads it), then forgotten

local function forget_old()
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if tonumber(cjson.decode(all[i + 1])['end']) + KEEP_US < now then redis.call('HDEL', KEYS[1], all[i]) end
  end
end

if ARGV[1] == 'put' then
  local start_us = tonumber(ARGV[3])
  if start_us == 0 then start_us = now end
  local end_us = tonumber(ARGV[4])
  if end_us == 0 then end_us = start_us + tonumber(ARGV[9]) end
  if end_us <= start_us then return {'bad', 'end must be after start'} end
  if end_us <= now then return {'bad', 'end has passed'} end
  local old = redis.call('HGET', KEYS[1], ARGV[2])
  local before = old and cjson.decode(old)
  local in_force = before and tonumber(before['start']) <= now and tonumber(before['end']) > now
  if in_force and start_us > now then
    start_us = tonumber(before['start'])  -- a window in force stays in force: no gap
  end
  -- A window that stays in force keeps its start announcement (announce.lua's flag 'as'); its
  -- end is announced anew. One that had ended (kept a day) starts again: announced again.
  local announced = in_force and start_us <= now and before['as'] or nil
  forget_old()
  redis.call('HSET', KEYS[1], ARGV[2], cjson.encode({
    start = int(start_us), ['end'] = int(end_us), categories = cjson.decode(ARGV[5]),
    channels = cjson.decode(ARGV[6]), note = ARGV[7], by = ARGV[8], at = int(now), as = announced}))
  return {'ok', int(start_us), int(end_us), redis.call('INCR', KEYS[2]), old or ''}
end

local raw = redis.call('HGET', KEYS[1], ARGV[2])
if not raw then return {0, ''} end
local window = cjson.decode(raw)
if tonumber(window['end']) <= now then return {0, ''} end
if tonumber(window['start']) > now then
  redis.call('HDEL', KEYS[1], ARGV[2])
else
  window['end'] = int(now)
  redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(window))
end
redis.call('INCR', KEYS[2])
return {1, int(now), raw}

-- announce.lua: the start or end announcement of a maintenance window, once for the fleet.
--
-- The flag that says it was made is set in the window's record by the same call that
-- appends the announcements to the outbox, so exactly one replica makes each.
--
-- KEYS[1] windows (hash: name -> JSON, see window.lua; flags 'as' and 'ae' added here)
-- KEYS[2] outbox (stream)
-- ARGV[1] name, ARGV[2] 'start' or 'end', ARGV[3] the announcement's id, ARGV[4..] its
--   channels (the window's own and those of its categories)
--
-- Returns the number of messages appended (0: not due yet, made already, or no window).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local window = cjson.decode(raw)
local flag = ARGV[2] == 'start' and 'as' or 'ae'
if window[flag] then return 0 end
if now < tonumber(ARGV[2] == 'start' and window.start or window['end']) then return 0 end
window[flag] = '1'
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(window))
for i = 4, #ARGV do
  redis.call('XADD', KEYS[2], '*', 'e', cjson.encode({k = 'window', id = ARGV[3] .. ':' .. (i - 3), ch = ARGV[i],
    window = ARGV[1], phase = ARGV[2], note = window.note or '', ['until'] = window['end']}))
end
return #ARGV - 3

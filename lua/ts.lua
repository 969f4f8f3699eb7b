-- ts.lua: a block of gateway ts values for the front doors, unique in the fleet.
--
-- A value is a time in microseconds of the store's clock, never given twice: each block
-- starts after the last value of the one before (so a clock that steps back, or two
-- replicas asking in the same microsecond, still get values of their own). Written as
-- "<seconds>.<6 digits>" it looks like the ts Slack gives a message.
--
-- KEYS[1] the last value given (string, us)
-- ARGV[1] how many values the block holds
-- Returns the first value of the block (a string of digits); the block is [first, first + ARGV[1]).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local first = math.max(now, last + 1)
redis.call('SET', KEYS[1], string.format('%.0f', first + tonumber(ARGV[1]) - 1))
return string.format('%.0f', first)

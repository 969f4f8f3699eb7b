-- wrk script: the storms of storm.lua at a chosen pace, and the answer-time percentiles.
--
--   wrk ... -s latency.lua URL -- PAUSE_MS [storm.lua's arguments]
--
-- Each connection waits PAUSE_MS between its requests (wrk's delay()), so C connections send about
-- C * 1000 / (PAUSE_MS + answer time) requests a second: at half the sustained rate the answer time
-- is small beside the pause, and the pace holds. done() prints p50, p99 and p99.9 in ms.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
dofile(here .. "storm.lua")
local storm_init, pause = init, 0

function init(args)
  pause = tonumber(args[1])
  local rest = {}
  for k = 2, #args do rest[#rest + 1] = args[k] end
  storm_init(rest)
end

function delay()
  return pause
end

function done(summary, latency, requests)
  io.write(string.format("percentiles p50 %.3f p99 %.3f p99.9 %.3f ms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000))
end

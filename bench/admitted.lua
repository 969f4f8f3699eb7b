-- wrk script: POST one small event per request, cycling through 20 categories, limits far away:
-- every event is admitted (logged, queued in the outbox, and with N > 0 waited for).
local bodies, i = {}, 0
for c = 0, 19 do
  bodies[c + 1] = string.format('{"category":"bench-%d","text":"deploy %d finished"}', c, c)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, "/v1/events", nil, bodies[i])
end

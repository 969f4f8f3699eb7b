-- wrk script: POST one small event per request, cycling through 20 categories.
local bodies, i = {}, 0
for c = 0, 19 do
  bodies[c + 1] = string.format(
    '{"category":"storm-%d","text":"disk full on host-%d","severity":"error","fields":{"host":"h%d"}}', c, c, c)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, "/v1/events", nil, bodies[i])
end

-- wrk script: POST one small event per request, cycling through 20 categories.
--
--   wrk ... -s storm.lua URL                 plain events (no dedup_key), categories storm-0..19
--   wrk ... -s storm.lua URL -- KEYS [links] alerts: KEYS distinct dedup_keys (key j in
--                                            category j % 20), with two links when "links"
--   wrk ... -s storm.lua URL -- admitted     plain events of categories bench-0..19, which
--                                            bench/replication.py leaves far from any limit
local bodies, i = {}, 0

local function plain(c)
  return string.format(
    '{"category":"storm-%d","text":"disk full on host-%d","severity":"error","fields":{"host":"h%d"}}', c, c, c)
end

local function alert(j, links)
  local c = j % 20
  local extra = ''
  if links then
    extra = string.format(',"links":[{"text":"Runbook","url":"https://runbooks.example.com/disk-full"},'
      .. '{"text":"Dashboard","url":"https://grafana.example.com/d/hosts?var-host=h%d"}]', j)
  end
  return string.format('{"category":"storm-%d","text":"disk full on host-%d","severity":"error",'
    .. '"fields":{"host":"h%d"},"dedup_key":"%s-%d"%s}', c, j, j, links and "linked" or "disk", j, extra)
end

local function admitted(c)
  return string.format('{"category":"bench-%d","text":"deploy %d finished"}', c, c)
end

function init(args)
  if args[1] == "admitted" then
    for c = 0, 19 do bodies[c + 1] = admitted(c) end
    return
  end
  local keys, links = tonumber(args[1] or "0"), args[2] == "links"
  if keys > 0 then
    for j = 0, keys - 1 do bodies[j + 1] = alert(j, links) end
  else
    for c = 0, 19 do bodies[c + 1] = plain(c) end
  end
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, "/v1/events", nil, bodies[i])
end

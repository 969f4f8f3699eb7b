-- wrk script: POST one small event per request, cycling through 20 categories.
--
--   wrk ... -s storm.lua URL                 plain events (no dedup_key), categories storm-0..19,
--                                            teams t0..t3 (fields.team: category % 4)
--   wrk ... -s storm.lua URL -- KEYS [links|critical] alerts: KEYS distinct dedup_keys (key j
--                                            in category j % 20), with two links when "links",
--                                            one key in ten of severity critical when "critical"
--                                            (in every category)
--   wrk ... -s storm.lua URL -- admitted     plain events of categories bench-0..19, which
--                                            bench/replication.py leaves far from any limit
--   wrk ... -s storm.lua URL -- webhook      Alertmanager's slack_configs payloads (about 1.5 KB, an
--                                            attachment of three alerts) to the incoming-webhook door
--   wrk ... -s storm.lua URL -- alerts-links real tools' alert storm: categories svc0..19, 5,000 keys,
--                                            one in ten critical, each with a runbook link whose url
--                                            names host n (n cycling over 20,000 bodies)
local bodies, i, path = {}, 0, "/v1/events"

local function plain(c)
  return string.format('{"category":"storm-%d","text":"disk full on host-%d","severity":"error",'
    .. '"fields":{"host":"h%d","team":"t%d"}}', c, c, c, c % 4)
end

local function alert(j, links, critical)
  local c = j % 20
  local extra = ''
  -- One key in ten critical, in every category: (j // 20) % 10 == 0.
  local severity = (critical and math.floor(j / 20) % 10 == 0) and "critical" or "error"
  if links then
    extra = string.format(',"links":[{"text":"Runbook","url":"https://runbooks.example.com/disk-full"},'
      .. '{"text":"Dashboard","url":"https://grafana.example.com/d/hosts?var-host=h%d"}]', j)
  end
  return string.format('{"category":"storm-%d","text":"disk full on host-%d","severity":"%s",'
    .. '"fields":{"host":"h%d","team":"t%d"},"dedup_key":"%s-%d"%s}', c, j, severity, j, c % 4,
    links and "linked" or "disk", j, extra)
end

-- Event n of the alerts-links storm. A key (n % 5000) keeps its category (5000 % 20 == 0) and its
-- severity: critical when (n // 20) % 10 == 0, one in ten in every category.
local function linked(n)
  local severity = math.floor(n / 20) % 10 == 0 and "critical" or "warning"
  return string.format('{"category":"svc%d","text":"disk almost full on host %d","severity":"%s",'
    .. '"dedup_key":"disk-%d","links":[{"text":"Runbook","url":"https://runbooks.example.com/disk?host=%d"}]}',
    n % 20, n, severity, n % 5000, n)
end

local function admitted(c)
  return string.format('{"category":"bench-%d","text":"deploy %d finished"}', c, c)
end

-- What Alertmanager's slack_configs send for a group of three firing alerts (its default templates).
local function slack(j)
  local lines = {}
  for k = 1, 3 do
    lines[k] = string.format('*Alert:* DiskFull - critical\\n*Description:* Disk /var on host-%d-%d is 95%% full, '
      .. 'writes will fail within the hour\\n*Details:*\\n \\u2022 *alertname:* `DiskFull`\\n \\u2022 *instance:* '
      .. '`host-%d-%d:9100`\\n \\u2022 *job:* `node`\\n \\u2022 *severity:* `critical`\\n', j, k, j, k)
  end
  return string.format('{"channel":"#alerts","username":"Alertmanager","icon_emoji":":fire:","link_names":false,'
    .. '"attachments":[{"title":"[FIRING:3] DiskFull (node prod critical)","title_link":'
    .. '"http://alertmanager.example:9093/#/alerts?receiver=slack-%d","pretext":"","text":"%s","fallback":'
    .. '"[FIRING:3] DiskFull (node prod critical) | http://alertmanager.example:9093/#/alerts?receiver=slack",'
    .. '"callback_id":"","footer":"","color":"danger","mrkdwn_in":["fallback","pretext","text"],"actions":'
    .. '[{"type":"button","text":"Runbook :green_book:","url":"https://runbooks.example.com/DiskFull"}],'
    .. '"fields":[{"title":"cluster","value":"prod-%d","short":true},{"title":"severity","value":"critical",'
    .. '"short":true},{"title":"team","value":"storage","short":true}]}]}', j, table.concat(lines), j)
end

function init(args)
  if args[1] == "webhook" then
    for j = 0, 19 do bodies[j + 1] = slack(j) end
    path = "/services/T0000/B0000/bench-secret"
    return
  end
  if args[1] == "alerts-links" then
    for n = 0, 19999 do bodies[n + 1] = linked(n) end
    return
  end
  if args[1] == "admitted" then
    for c = 0, 19 do bodies[c + 1] = admitted(c) end
    return
  end
  local keys, links, critical = tonumber(args[1] or "0"), args[2] == "links", args[2] == "critical"
  if keys > 0 then
    for j = 0, keys - 1 do bodies[j + 1] = alert(j, links, critical) end
  else
    for c = 0, 19 do bodies[c + 1] = plain(c) end
  end
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, path, nil, bodies[i])
end

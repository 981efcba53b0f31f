-- The compose demo's workload: a small "request handler" loop whose flame
-- graph has a recognisable shape within seconds. Each request is parsed,
-- routed, and answered by one of a few handlers that do different kinds of
-- work (string building, table sorting, recursion, a coroutine pipeline), in
-- fixed proportions, so the graph has the same shape every time.
--
--   lua5.4 workload.lua [SECONDS]     (default 60; 0 runs forever)

local seconds = tonumber(arg and arg[1]) or 60

-- The handlers are fields of a loaded module, as in a real program, so the
-- profiler names them (a local function would be <anon> SOURCE:LINE).
local demo = {}
package.loaded.demo = demo

function demo.parse_request(line)
  local method, path, query = line:match("^(%u+) ([^?]+)%??(.*)$")
  local params = {}
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do params[k] = v end
  return { method = method, path = path, params = params }
end

function demo.escape_html(s)
  return (s:gsub("[<>&\"]", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;", ['"'] = "&quot;" }))
end

function demo.render_row(i, name)
  return string.format("<tr><td>%d</td><td>%s</td></tr>", i, demo.escape_html(name))
end

function demo.render_page(req)
  local rows = {}
  for i = 1, 400 do rows[#rows + 1] = demo.render_row(i, "item <" .. i .. "> & " .. (req.params.q or "")) end
  return "<table>" .. table.concat(rows, "\n") .. "</table>"
end

function demo.by_score(a, b)
  return a.score < b.score or (a.score == b.score and a.id < b.id)
end

function demo.sort_report(req)
  local n = tonumber(req.params.n) or 1000
  local t = {}
  local seed = 12345
  for i = 1, n do
    seed = (seed * 1103515245 + 12345) % 2147483648
    t[i] = { id = i, score = seed % 1000 }
  end
  table.sort(t, demo.by_score)
  return t[1].score
end

function demo.fib(n)
  if n < 2 then return n end
  return demo.fib(n - 1) + demo.fib(n - 2)
end

function demo.compute()
  return demo.fib(20)
end

-- A generator (coroutine) feeding a consumer: its frames show under the consumer.
function demo.numbers(limit)
  return coroutine.wrap(function()
    for i = 1, limit do coroutine.yield(i * i % 97) end
  end)
end

function demo.pipeline()
  local sum = 0
  for v in demo.numbers(6000) do sum = sum + v end
  return sum
end

local routes = {
  ["/page"] = demo.render_page,
  ["/report"] = demo.sort_report,
  ["/fib"] = demo.compute,
  ["/stream"] = demo.pipeline,
}
-- 20 requests, always in these proportions.
local traffic = {}
for _ = 1, 8 do traffic[#traffic + 1] = "GET /page?q=lua&lang=en" end
for _ = 1, 5 do traffic[#traffic + 1] = "GET /report?n=1000" end
for _ = 1, 3 do traffic[#traffic + 1] = "GET /fib" end
for _ = 1, 4 do traffic[#traffic + 1] = "GET /stream" end

function demo.handle(line)
  local req = demo.parse_request(line)
  return routes[req.path](req)
end

function demo.serve(deadline)
  local served = 0
  repeat
    for _, line in ipairs(traffic) do demo.handle(line) end
    served = served + #traffic
  until deadline and os.clock() >= deadline
  return served
end

local served = demo.serve(seconds > 0 and os.clock() + seconds or nil)
print(string.format("demo workload: served %d requests in %.1f s of CPU", served, os.clock()))

-- The compose demo's workload: a small "request handler" loop whose flame
-- graph has a recognisable shape within seconds. Each request is parsed,
-- routed, and answered by one of a few handlers that do different kinds of
-- work (string building, table sorting, recursion, a coroutine pipeline), in
-- fixed proportions, so the graph has the same shape every time.
--
--   lua5.4 workload.lua [SECONDS]     (default 60; 0 runs forever)

local seconds = tonumber(arg and arg[1]) or 60

local function parse_request(line)
  local method, path, query = line:match("^(%u+) ([^?]+)%??(.*)$")
  local params = {}
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do params[k] = v end
  return { method = method, path = path, params = params }
end

local function escape_html(s)
  return (s:gsub("[<>&\"]", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;", ['"'] = "&quot;" }))
end

local function render_row(i, name)
  return string.format("<tr><td>%d</td><td>%s</td></tr>", i, escape_html(name))
end

local function render_page(req)
  local rows = {}
  for i = 1, 400 do rows[#rows + 1] = render_row(i, "item <" .. i .. "> & " .. (req.params.q or "")) end
  return "<table>" .. table.concat(rows, "\n") .. "</table>"
end

local function sort_report(req)
  local n = tonumber(req.params.n) or 3000
  local t = {}
  local seed = 12345
  for i = 1, n do
    seed = (seed * 1103515245 + 12345) % 2147483648
    t[i] = { id = i, score = seed % 1000 }
  end
  table.sort(t, function(a, b) return a.score < b.score or (a.score == b.score and a.id < b.id) end)
  return t[1].score
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

-- A generator (coroutine) feeding a consumer: its frames show under the consumer.
local function numbers(limit)
  return coroutine.wrap(function()
    for i = 1, limit do coroutine.yield(i * i % 97) end
  end)
end

local function pipeline()
  local sum = 0
  for v in numbers(6000) do sum = sum + v end
  return sum
end

local routes = {
  ["/page"] = render_page,
  ["/report"] = sort_report,
  ["/fib"] = function() return fib(20) end,
  ["/stream"] = pipeline,
}
-- 20 requests in the proportions of the header comment.
local traffic = {}
for _ = 1, 8 do traffic[#traffic + 1] = "GET /page?q=lua&lang=en" end
for _ = 1, 5 do traffic[#traffic + 1] = "GET /report?n=3000" end
for _ = 1, 3 do traffic[#traffic + 1] = "GET /fib" end
for _ = 1, 4 do traffic[#traffic + 1] = "GET /stream" end

local function handle(line)
  local req = parse_request(line)
  return routes[req.path](req)
end

local function serve(deadline)
  local served = 0
  repeat
    for _, line in ipairs(traffic) do handle(line) end
    served = served + #traffic
  until deadline and os.clock() >= deadline
  return served
end

local served = serve(seconds > 0 and os.clock() + seconds or nil)
print(string.format("demo workload: served %d requests in %.1f s of CPU", served, os.clock()))

-- An allocation-heavy Lua workload: string building, table churn, closures.
-- Usage: lua5.4 alloc.lua [SCALE] (default 1: about a second here).
local scale = tonumber(arg and arg[1]) or 1

local function build_strings(n)
  local parts = {}
  for i = 1, n do parts[#parts + 1] = "k" .. i .. "=" .. (i * 3) end
  local s = table.concat(parts, "&")
  local out = {}
  for k, v in s:gmatch("(%w+)=(%w+)") do out[k] = v end
  return #s
end

local function churn_tables(n)
  local sum = 0
  for i = 1, n do
    local t = {x = i, y = i * 2, list = {i, i + 1, i + 2}}
    sum = sum + t.x + t.list[3]
  end
  return sum
end

local function make_closures(n)
  local fs = {}
  for i = 1, n do
    local base = i
    fs[i % 64 + 1] = function(d) return base + d end
  end
  local sum = 0
  for _, f in ipairs(fs) do sum = sum + f(1) end
  return sum
end

local total = 0
for round = 1, math.floor(10 * scale) do
  total = total + build_strings(30000) + churn_tables(60000) + make_closures(60000)
end
print("alloc checksum", total)

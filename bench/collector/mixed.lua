-- A CPU-bound Lua workload mixing calls, table work, string work, closures
-- and coroutines. Usage: lua5.4 mixed.lua [SCALE] (default 1: ~1 s here).
local scale = tonumber(arg and arg[1]) or 1

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function tables(n)
  local t = {}
  for i = 1, n do t[i] = {id = i, name = "item" .. (i % 100), score = (i * 7919) % 1000} end
  table.sort(t, function(a, b) return a.score < b.score end)
  local byname = {}
  for _, v in ipairs(t) do byname[v.name] = (byname[v.name] or 0) + v.score end
  local sum = 0
  for _, v in pairs(byname) do sum = sum + v end
  return sum
end

local function strings(n)
  local parts = {}
  for i = 1, n do parts[#parts + 1] = string.format("%d:%s", i, ("x"):rep(i % 17)) end
  local s = table.concat(parts, ",")
  local count = 0
  for word in s:gmatch("%d+") do count = count + #word end
  return count + #s:gsub("x", "y"):upper()
end

local function closures(n)
  local function counter()
    local c = 0
    return function(d) c = c + d return c end
  end
  local total = 0
  for i = 1, n do
    local f = counter()
    for j = 1, 10 do total = total + f(j) end
  end
  return total
end

local function coroutines(n)
  local gen = coroutine.wrap(function()
    for i = 1, n do coroutine.yield(i * 2) end
    return nil
  end)
  local sum = 0
  for v in gen do sum = sum + v end
  local co = coroutine.create(function(a)
    while true do a = coroutine.yield(a + 1) end
  end)
  local v = 0
  for i = 1, n do local _, r = coroutine.resume(co, v) v = r end
  return sum + v
end

local checksum = 0
for round = 1, math.floor(12 * scale) do
  checksum = checksum + fib(22) + tables(20000) + strings(20000) + closures(20000) + coroutines(40000)
end
print("mixed checksum", checksum)

-- A CPU-bound LuaJIT benchmark (bench/jit/run.sh): numeric loops the JIT
-- compiles, table work, string building and a recursive call tree, so the
-- samples fall in compiled code, the interpreter and C.
local N = tonumber(arg and arg[1]) or 6
local function loop(n)
  local s = 0
  for i = 1, n do s = s + (i * i) % 7 end
  return s
end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function tables(n)
  local t = {}
  for i = 1, n do t[i] = {x = i, y = i * 2} end
  local s = 0
  for i = 1, n do s = s + t[i].x + t[i].y end
  return s
end
local function strings(n)
  local parts = {}
  for i = 1, n do parts[#parts + 1] = tostring(i) end
  return #table.concat(parts, ",")
end
local t = 0
for _ = 1, N do
  t = t + loop(3e7) + fib(27) + tables(3e5) + strings(2e5)
end
print(t)

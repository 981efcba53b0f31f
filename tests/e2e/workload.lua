-- A short CPU-bound workload with calls, strings and a coroutine, for the
-- end-to-end streaming test.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function strings()
  local t = {}
  for i = 1, 2000 do t[#t + 1] = tostring(i) .. "x" end
  return table.concat(t)
end
local gen = coroutine.wrap(function() while true do coroutine.yield(fib(12)) end end)
local t0 = os.clock()
while os.clock() - t0 < 1.2 do fib(16); strings(); gen() end
print("done " .. arg[1])

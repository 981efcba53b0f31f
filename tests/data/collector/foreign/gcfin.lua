local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function finalize(o) spin(30000) end
local make
if newproxy then
  local proto = newproxy(true)
  getmetatable(proto).__gc = finalize
  make = function() return newproxy(proto) end
else
  local mt = {__gc = finalize}
  make = function() return setmetatable({}, mt) end
end
local keep = {}
for i = 1, 1.2e6 do keep[i] = {} end
for _ = 1, 8 do
  for _ = 1, 500 do make() end
  collectgarbage()
end
-- A collection's own work, then its finalizers (vm_test_lib.sh:
-- vm_gc_work_check): marking the 1.2e6 live tables takes 14-40 ms per
-- collectgarbage() on 5.1-5.4 (over 8 periods at 999 Hz, when the timers
-- used to rest), the 500 finalizers about 125 ms after it. Eight rounds:
-- a wait keeps 16 positions (Sampler::kMaxPos), and with four rounds of
-- 1,000 the marking's share read 2.9% once where it is 5-13%.

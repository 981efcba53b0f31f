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
for _ = 1, 4 do
  for _ = 1, 1000 do make() end
  collectgarbage()
end
-- A collection's own work, then its finalizers (vm_test_lib.sh:
-- vm_gc_work_check): marking the 1.2e6 live tables takes 14-19 ms per
-- collectgarbage() on 5.1-5.4 (over 8 periods at 999 Hz, when the timers
-- used to rest), the 1,000 finalizers about 250 ms after it.

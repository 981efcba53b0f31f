local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function finalize(o) spin(4000) end
local make
if newproxy then
  local proto = newproxy(true)
  getmetatable(proto).__gc = finalize
  make = function() return newproxy(proto) end
else
  local mt = {__gc = finalize}
  make = function() return setmetatable({}, mt) end
end
for _ = 1, 4 do
  for _ = 1, 3000 do make() end
  collectgarbage()
end
io.write(os.clock(), "\n")
-- 3,000 finalizers per collectgarbage(), each spinning (vm_test_lib.sh:
-- vm_finalizer_check): userdata from newproxy where the VM has it (5.1,
-- LuaJIT), tables with __gc after. Prints the program's CPU seconds.

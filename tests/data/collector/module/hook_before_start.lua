-- debug.gethook, under require "luaflame" started after the program set
-- its hooks, answers what it answered before start, in every mode (5.1-5.3
-- answered nil for the function while tracing: db_gethook keeps it under a
-- static address, and saw luaflame's hook there) and for a thread of its
-- own. Prints one line per mode: the answers that differ, else "same".
local lf = require "luaflame"
local function f() end
debug.sethook(f, "l", 3)
local co = coroutine.create(function() end)
debug.sethook(co, f, "r")
local function answers()
  local h, m, c = debug.gethook()
  local h2, m2, c2 = debug.gethook(co)
  return {tostring(h == f), m, c, tostring(h2 == f), m2, c2}
end
local want = table.concat(answers(), " ")
for _, mode in ipairs{"sample", "sample+alloc", "trace", "both"} do
  lf.start{mode = mode, quiet = true}
  local got = table.concat(answers(), " ")
  lf.stop()
  print(mode, got == want and "same" or got .. " (want " .. want .. ")")
end
print("after", table.concat(answers(), " ") == want and "same" or "differs")

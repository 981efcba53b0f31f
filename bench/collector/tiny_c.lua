-- A known answer for a tiny C function's time (docs/collector.md): the same
-- loop with and without a call to `type`, timed by os.clock unprofiled
-- (the call's own cost per iteration on stderr), and under luaflame:
--   lua5.4 bench/collector/tiny_c.lua
--   luaflame run --mode sample -o s.folded bench/collector/tiny_c.lua
--   luaflame run --mode trace -o t.folded bench/collector/tiny_c.lua
-- then compare `[C] type`'s share of `with` and itself in each.
local type, N = type, tonumber(arg and arg[1]) or 3000000

local function with()
  local c = 0
  for i = 1, N do if type(i) == "number" then c = c + 1 end end
  return c
end

local function without()
  local c, t = 0, "number"
  for _ = 1, N do if t == "number" then c = c + 1 end end
  return c
end

local clock = os.clock
local t0 = clock()
with()
local t1 = clock()
without()
local t2 = clock()
io.stderr:write(string.format("with %.3f s, without %.3f s: the call %.1f ns an iteration\n",
  t1 - t0, t2 - t1, ((t1 - t0) - (t2 - t1)) / N * 1e9))

-- Where the trace hook's own time goes in the samples of a both run: a Lua
-- function calling a tiny C function in a loop, profiled with the samples
-- and the trace of the same execution. Prints each frame's sampled and
-- traced self time (the samples in ms of the sampled clock, so that with
-- the wall clock both are on one scale), and the samples whose recorded
-- frame had returned before the one-shot hook took them (samples_moved).
--   LUA_CPATH="BUILD/collector/?.so;;" lua5.4 bench/collector/hook_split.lua [MODE] [CLOCK] [CALLS]
-- MODE both (default) or sample, CLOCK wall (default) or cpu.
local lf = require "luaflame"
local mode, clock, calls = arg[1] or "both", arg[2] or "wall", tonumber(arg[3]) or 3e6
local hz = 999
local out = os.tmpname()

local find = string.find
local s = "      x"
local function caller(n)
  local k = 0
  for _ = 1, n do k = k + find(s, "^ *x", 1) end
  return k
end

lf.start{mode = mode, clock = clock, hz = hz, output = out .. ".folded"}
caller(calls)
local r = lf.stop()

local function self_of(path)  -- leaf frame -> value, total
  local f = io.open(path)
  if not f then return nil end
  local by, total = {}, 0
  for line in f:lines() do
    local stack, v = line:match("^(.*) (%d+)$")
    local leaf = stack:match("([^;]*)$")
    by[leaf] = (by[leaf] or 0) + tonumber(v)
    total = total + tonumber(v)
  end
  f:close()
  os.remove(path)
  return by, total
end

local period_ms = math.floor(1e9 / hz) / 1e6
local smp, nsmp = self_of(out .. ".folded")
local tim, ntim = self_of(out .. ".time.folded")
os.remove(out)
print(("%s, %s clock, %d calls: %d samples (%.0f ms of the clock), %d moved (%.1f%%)"):format(
  mode, clock, calls, r.samples, nsmp * period_ms, r.samples_moved,
  100 * r.samples_moved / math.max(1, r.samples)))
for _, frame in ipairs {"caller", "[C] string.find"} do
  local sv, tv = 0, 0
  for k, v in pairs(smp) do if k:find(frame, 1, true) == 1 then sv = sv + v end end
  for k, v in pairs(tim or {}) do if k:find(frame, 1, true) == 1 then tv = tv + v end end
  if tim then
    print(("  %-16s sampled %6.1f ms (%5.1f%%)  traced %6.1f ms (%5.1f%%)"):format(
      frame, sv * period_ms, 100 * sv / nsmp, tv / 1e6, 100 * tv / ntim))
  else
    print(("  %-16s sampled %6.1f ms (%5.1f%%)"):format(frame, sv * period_ms, 100 * sv / nsmp))
  end
end

-- What `luajit -jp=i1` delivers: jit.profile at a 1 ms interval (jit.p's
-- own sampler), samples counted per ms of process CPU time. Usage:
-- luajit jp_rate.lua script.lua [args...]
local profile = require "jit.profile"
local n = 0
profile.start("fi1", function(_, samples) n = n + samples end)
local c0 = os.clock()
local script = table.remove(arg, 1)
arg[0] = script
dofile(script)
local ms = (os.clock() - c0) * 1000
profile.stop()
io.stderr:write(string.format("jit.profile i1: %d samples over %.0f ms of CPU: %.3f samples/ms\n", n, ms, n / ms))

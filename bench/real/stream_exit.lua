-- Runs a Lua script (arg[1], with the rest as its arguments) and writes to
-- stderr the moment it exits, from /proc/uptime (the clock bench/real/stream.sh
-- reads when `luaflame run` returns): "program exit at SECONDS".
local function stamp()
  local f = io.open("/proc/uptime")
  local t = f and f:read("n")
  if f then f:close() end
  io.stderr:write(string.format("program exit at %.2f\n", t or 0))
end
local real_exit = os.exit
os.exit = function(...)
  stamp()
  return real_exit(...)
end
local script = table.remove(arg, 1)
arg[0] = script
local chunk = assert(loadfile(script))
chunk(table.unpack(arg))
stamp()

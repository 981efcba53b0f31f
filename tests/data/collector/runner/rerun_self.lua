-- Regression (issue 10): arg[-1] is the interpreter, as lua5.4 sets it, so a
-- program can run itself again (penlight's app.lua(), used by its tests).
local app, utils = require "pl.app", require "pl.utils"
if arg[1] == "child" then
  print("child got", arg[2])
  return
end
local cmd, interp = app.lua()
print("interpreter", interp, arg[-2])
local p = assert(io.popen(cmd .. " " .. utils.quote_arg(arg[0]) .. " child " .. utils.quote_arg(arg[2])))
io.write(p:read("a"))
print("child status", p:close())

-- An NSE script with a known answer for `luaflame attach` (attach_test.sh):
-- heavy does three times light's iterations of the same work.
description = "luaflame attach test: heavy 75%, light 25%"
categories = {"safe"}
author = "luaflame"
license = "Same as Nmap"
portrule = function(host, port) return true end
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
action = function(host, port)
  local t = 0
  for _ = 1, 24 do t = t + heavy(3000000) + light(1000000) end
  return "done " .. t
end

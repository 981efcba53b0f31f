-- A HAProxy Lua service with a known answer for `luaflame attach`
-- (attach_test.sh): each request runs heavy three times as long as light.
local function heavy(n) local s = 0 for i = 1, n do s = s + (i * 7) % 13 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + (i * 5) % 11 end return s end
core.register_service("hot", "http", function(applet)
  local body = "ok " .. (heavy(300000) + light(100000)) .. "\n"
  applet:set_status(200)
  applet:add_header("content-length", string.len(body))
  applet:start_response()
  applet:send(body)
end)

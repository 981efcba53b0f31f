-- What a program sees of coroutines under ngx_lua, with luaflame or without
-- (nginx_test.sh compares the page with parity.expected): resume and wrap
-- of what is not a coroutine, dead and failing coroutines, values in and
-- out through yields and ngx.sleep, a traceback; ngx.thread.spawn of what
-- is not a Lua function, a thread's values, error and traceback.
local M = {}

local function line(...)
  local t = {}
  for i = 1, select("#", ...) do t[#t + 1] = tostring((select(i, ...))) end
  ngx.say(table.concat(t, " "))
end

function M.run()
  line(pcall(coroutine.resume, 1))
  line(pcall(function() return coroutine.resume(1) end))
  local co = coroutine.create(function() error("boom") end)
  line(coroutine.resume(co))
  line(coroutine.resume(co))
  line(coroutine.status(co))
  local co3 = coroutine.create(function(x)
    local y = coroutine.yield(x + 1)
    ngx.sleep(0)
    return y * 2
  end)
  line(coroutine.resume(co3, 1))
  line(coroutine.resume(co3, 10))
  line(coroutine.resume(co3))
  line(pcall(coroutine.wrap, 1))
  line(pcall(coroutine.wrap))
  local g = coroutine.wrap(function(a)
    local b = coroutine.yield(a + 1)
    ngx.sleep(0)
    local c = coroutine.yield(b * 2)
    return c, "end"
  end)
  line(g(1), g(5), select("#", g(7)), type(g))
  local w = coroutine.wrap(function(...) return select("#", ...), ... end)
  line(w(nil, nil, 3))
  line(coroutine.wrap(function() return coroutine.status(coroutine.running()) end)())
  line(debug.traceback("tb"))
  line(pcall(ngx.thread.spawn, 1))
  line(pcall(ngx.thread.spawn, print))
  local t = ngx.thread.spawn(function(a, b)
    ngx.sleep(0)
    return a + b, select("#", a, b)
  end, 1, 2)
  line(type(t), coroutine.status(t))
  line(ngx.thread.wait(t))
  line(ngx.thread.wait(ngx.thread.spawn(function() error("uboom") end)))
  line(ngx.thread.wait(ngx.thread.spawn(function() return debug.traceback("in thread") end)))
  line(ngx.thread.wait(ngx.thread.spawn(function(...) return select("#", ...) end, nil, nil)))
end

return M

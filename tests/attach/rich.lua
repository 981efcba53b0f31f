-- HAProxy's Lua entry points at once, for attach_test.sh's traced run
-- (--mode both): a task, a converter, a fetch, an action and a service
-- that resumes a coroutine of its own, yields to HAProxy (core.sleep,
-- core.yield), talks to a backend through a cosocket and catches an error.
-- HAProxy also yields each of them from its own count hook (forced yield),
-- set from C before each resume. Each entry point calls fib a known number
-- of times per run of it: the trace's call counts are exact, and every
-- path starts at an entry point (none rootless).
local count = 0
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
core.register_task(function()
  for _ = 1, 20 do count = count + fib(15); core.msleep(5) end
end)
core.register_converters("twice", function(s) return s .. s end)
core.register_fetches("fibs", function() return tostring(fib(18)) end)
core.register_action("tag", {"http-req"}, function(txn)
  txn:set_var("req.tag", "t" .. fib(12))
end)
core.register_service("rich", "http", function(applet)
  local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
  local _, x = coroutine.resume(co, 1)
  local _, y = coroutine.resume(co, x)
  core.sleep(0)
  core.yield()
  local sock = core.tcp()
  sock:settimeout(1)
  local got = "-"
  if sock:connect("127.0.0.1", tonumber(os.getenv("BACK_PORT"))) then
    sock:send("GET / HTTP/1.0\r\n\r\n")
    got = sock:receive("*l") or "nil"
    sock:close()
  end
  local ok, err = pcall(function() error({code = 7}) end)
  local body = table.concat({"y=" .. y, "got=" .. got, "pcall=" .. tostring(ok) .. ":" .. err.code,
    "tag=" .. tostring(applet:get_var("req.tag")), "fib=" .. fib(20)}, " ") .. "\n"
  applet:set_status(200)
  applet:add_header("content-length", string.len(body))
  applet:start_response()
  applet:send(body)
end)

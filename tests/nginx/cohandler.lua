-- A request handler that runs its work in coroutines (nginx_test.sh).
-- The known answer: a coroutine's frames hang under the handler and
-- coroutine.resume, both before the ngx.sleep that yields it to nginx
-- (spin_before) and after nginx's C code resumed it (spin_after); a
-- wrapped coroutine's under the handler and the function wrap made
-- (spin_wrapped, after an ngx.sleep); a thread's from ngx.thread.spawn
-- under the handler that spawned it (spin_spawned, before an ngx.sleep and
-- after, while the handler waits for it in ngx.thread.wait).
local M = {}

-- The four spins have one body on purpose: each is its own prototype, so
-- its own frame, and the test tells where each ran by its name.

local function spin_before(n)
  local s = 0
  for i = 1, n do s = (s + i * i) % 1000003 end
  return s
end

local function spin_after(n)
  local s = 0
  for i = 1, n do s = (s + i * i) % 1000003 end
  return s
end

local function spin_wrapped(n)
  local s = 0
  for i = 1, n do s = (s + i * i) % 1000003 end
  return s
end

local function spin_spawned(n)
  local s = 0
  for i = 1, n do s = (s + i * i) % 1000003 end
  return s
end

local function work(n)
  local a = spin_before(n)
  ngx.sleep(0)  -- yields to nginx, which resumes this coroutine later
  local b = spin_after(n)
  return a + b
end

local function generate(n)
  ngx.sleep(0)
  coroutine.yield(spin_wrapped(n))
end

function M.handle()
  local co = coroutine.create(work)
  local ok, s = coroutine.resume(co, 20000)
  local g = coroutine.wrap(generate)(10000)
  ngx.say(ok and s + g or "failed")
end

local function in_thread(n)
  local a = spin_spawned(n)
  ngx.sleep(0)
  return a + spin_spawned(n)
end

function M.threads()
  local t = ngx.thread.spawn(in_thread, 20000)
  local ok, s = ngx.thread.wait(t)
  ngx.say(ok and s or "failed")
end

return M

-- A request handler that runs its work in coroutines (nginx_test.sh).
-- The known answer: a coroutine's frames hang under the handler and
-- coroutine.resume, both before the ngx.sleep that yields it to nginx
-- (spin_before) and after nginx's C code resumed it (spin_after); a
-- wrapped coroutine's under the handler and the function wrap made
-- (spin_wrapped, after an ngx.sleep).
local M = {}

-- The three spins have one body on purpose: each is its own prototype, so
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

return M

-- coroutine.resume and wrap in every state, with luaflame's wrappers in
-- place: values in and out, a dead coroutine, a running one (itself, or one
-- resuming another), errors of every kind of value, nil and many results.
local co = coroutine.create(function(a, b)
  local c, d = coroutine.yield(a + b, "two", nil)
  local e = coroutine.yield(c .. d)
  return e, select("#", coroutine.yield()), "done"
end)
print(coroutine.resume(co, 1, 2))
print(coroutine.resume(co, "x", "y"))
print(coroutine.resume(co, "z"))
print(coroutine.resume(co, 1, 2, 3))
print(coroutine.status(co), coroutine.resume(co))
local self_co
self_co = coroutine.create(function() return coroutine.resume(self_co) end)
print(coroutine.resume(self_co))
local outer
local inner = coroutine.create(function() return coroutine.resume(outer) end)
outer = coroutine.create(function() return coroutine.resume(inner) end)
print(coroutine.resume(outer))
local ok7, e7 = coroutine.resume(coroutine.create(function() error({code = 7}) end))
print(ok7, type(e7), e7.code)
print(coroutine.resume(coroutine.create(function() error() end)))
print(coroutine.resume(coroutine.create(function() return end)))
local many = coroutine.wrap(function(...) coroutine.yield(...) return select("#", ...) end)
print(many(1, nil, 3, nil))
print(many())
print(pcall(many))
local gen = coroutine.wrap(function() error({code = 8}) end)
local ok, e = pcall(gen)
print(ok, type(e), e.code)
print(pcall(coroutine.wrap, 42))

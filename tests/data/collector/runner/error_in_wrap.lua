local gen = coroutine.wrap(function() coroutine.yield(1) error("in generator") end)
print(gen())
print(gen())

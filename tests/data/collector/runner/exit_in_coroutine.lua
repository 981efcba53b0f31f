-- os.exit from a coroutine resumed by a coroutine (issue 27): the profile
-- ends with the program, whose exit status and output are its own.
local outer = coroutine.wrap(function()
  local inner = coroutine.create(function(n)
    local x = 0
    for i = 1, n do x = x + i % 7 end
    print("inner", x)
    os.exit(3, true)
  end)
  print(coroutine.resume(inner, 100000))
end)
outer()
print("not reached")

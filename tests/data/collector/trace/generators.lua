-- Generators: the coroutine's frames sit under the consumer that resumed it.
local function produce(n)
  for i = 1, n do
    coroutine.yield(i)
  end
end
local function gen_wrap(n)
  return coroutine.wrap(function()
    produce(n)
  end)
end
local function consume_wrap()
  local t = 0
  for v in gen_wrap(3) do
    t = t + v
  end
  return t
end
local function consume_resume()
  local co = coroutine.create(produce)
  local t = 0
  while true do
    local ok, v = coroutine.resume(co, 3)
    if not v then
      break
    end
    t = t + v
  end
  return t
end
assert(consume_wrap() == 6)
assert(consume_resume() == 6)

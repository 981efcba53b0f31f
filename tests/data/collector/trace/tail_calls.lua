-- Tail calls replace their caller's frame: c appears under a, not under b.
local function c(n)
  return n + 1
end
local function b(n)
  return c(n)
end
function a(n)
  local r = b(n)
  return r
end
for i = 1, 5 do
  a(i)
end

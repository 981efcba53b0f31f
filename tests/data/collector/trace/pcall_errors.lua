-- An error unwinds three frames with no return events; pcall catches it.
-- after() must then be a child of the main chunk, not of the dead frames.
local function deep(n)
  if n == 0 then
    error("boom")
  end
  local r = deep(n - 1)
  return r
end
local function after()
  return 1
end
for i = 1, 4 do
  local ok = pcall(deep, 2)
  assert(not ok)
  after()
end
local ok = pcall(error, "direct")
after()

-- The request handler the nginx test profiles (nginx_test.sh): named
-- functions, so the live run shows them under the worker's frames.
local M = {}

local function checksum(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 1000003 end
  return s
end

local function render(n)
  local parts = {}
  for i = 1, n do parts[#parts + 1] = tostring(i) end
  return table.concat(parts, ",")
end

function M.handle()
  ngx.say(checksum(20000), " ", #render(200))
end

return M

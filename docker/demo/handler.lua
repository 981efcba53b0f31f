-- The nginx demo's request handler (docker/demo/nginx.conf.in).
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

function M.work()
  return checksum(20000) + #render(200)
end

return M

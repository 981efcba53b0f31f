-- The nginx request handler: the compose demo's (docker/demo/nginx.conf.in;
-- installed by docker/build.sh) and the nginx test's (tests/nginx/nginx.conf.in).
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

function M.handle() -- line 17: tests/nginx/nginx_test.sh and docs/luajit.md cite it
  ngx.say(checksum(20000), " ", #render(200))
end

-- The demo's timer and location: the same work, as a number.
function M.work()
  return checksum(20000) + #render(200)
end

return M

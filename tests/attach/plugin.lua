-- A plugin-style module for `nvim --headless` (attach_test.sh), known answer:
-- heavy does three times light's iterations of the same work.
local M = {}
local function heavy(n) local s = 0 for i = 1, n do s = s + (i * 7) % 13 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + (i * 5) % 11 end return s end
function M.run()
  local t = 0
  for _ = 1, 120 do t = t + heavy(3000000) + light(1000000) end
  return t
end
return M

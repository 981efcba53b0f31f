-- A call tree with over 100,000 distinct paths: four functions that call
-- one another in every order, eight levels deep (4^8 leaves, each path
-- once), then prints a checksum so the run's output can be compared.
local fs = {}
local function step(n, depth)
  if depth == 0 then return 1 end
  local r = fs[n % 4 + 1](n // 4, depth - 1)  -- not a tail call: each level is a frame
  return r
end
fs[1] = function(n, d) local r = step(n, d) return r end
fs[2] = function(n, d) return step(n, d) + 0 end
fs[3] = function(n, d) return step(n, d) * 1 end
fs[4] = function(n, d) return (step(n, d)) end
local depth = tonumber(arg and arg[1]) or 8
local sum = 0
for i = 0, 4 ^ depth - 1 do sum = sum + step(math.tointeger(i), depth) end
print("paths done " .. sum)

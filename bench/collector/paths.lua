-- Many distinct call paths: 20 functions calling each other 3 ways, 12
-- deep, about 800,000 calls and 500,000 distinct paths. For the trace
-- mode's memory: luaflame run --mode trace bench/collector/paths.lua
FNS = {}
for i = 1, 20 do
  FNS[i] = load([[
    local i = ...
    return function(d, path)
      if d == 0 then return 1 end
      local s = 0
      for k = 1, 3 do s = s + FNS[(path * 7 + k * i) % 20 + 1](d - 1, path * 3 + k) end
      return s
    end]], "=f" .. i)(i)
end
print("paths checksum", FNS[1](12, 1))

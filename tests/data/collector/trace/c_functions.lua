-- C functions are frames named after their library.
local s = string.rep("ab", 10)
local t = {}
for w in string.gmatch(s, "a") do
  t[#t + 1] = w
end
table.sort(t)
local u = s:upper()
local n = select("#", 1, 2, 3)
print = print

-- 100,000-deep recursion: traced, every level is a distinct call path
-- whose folded line repeats the whole path (about 100 GB of folded text
-- uncut). The regression for the output size limit.
local function rec(n)
  if n == 0 then return 0 end
  return 1 + rec(n - 1)  -- not a tail call: every level stays on the stack
end
print("depth " .. rec(tonumber(arg[1]) or 100000))

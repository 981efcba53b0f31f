-- The program's own call and return hook sees the same events with luaflame
-- as without (tail calls, 5.1's "tail return" events, errors, coroutines).
local n = {}
debug.sethook(function(ev) n[ev] = (n[ev] or 0) + 1 end, "cr")
local function c(x) return x + 1 end
local function b(x) return c(x) end
local function a(x) local r = b(x) return r end
for i = 1, 1000 do a(i) end
for _ = 1, 5 do pcall(error, "x") end
local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(b(i)) end end)
for _ = 1, 3 do co() end
debug.sethook()
local t = {}
for k, v in pairs(n) do t[#t + 1] = k .. "=" .. v end
table.sort(t)
print(table.concat(t, " "))

-- debug.gethook answers what the program set, as without luaflame, on
-- every version (5.4: one nil for no hook; 5.1-5.3: nil, "", 0), in every
-- mode: luaflame's own hook is not what it reports (as penlight's
-- pl.pretty.read, which saves the hook, turns it off and puts it back).
-- A coroutine made after debug.sethook has its maker's mask and count
-- (lua_newthread copies the hook; PUC's debug.gethook finds no function of
-- its own there: nil, "cl", 7; LuaJIT's hook is the state's: f, "cl", 7).
local function f() end
print(debug.gethook())
debug.sethook(f, "cl", 7)
local h, m, c = debug.gethook()
print(h == f, m, c)
local co = coroutine.create(function()
  local h2, m2, c2 = debug.gethook()
  print("in", h2 == f, m2, c2)
end)
h, m, c = debug.gethook(co)
print("of", h == f, m, c)
-- Its first answer: PUC nil (no function of its own), LuaJIT f; never co.
local h0 = debug.gethook(co)
print("of, first", h0 == nil and "nil" or h0 == f and "f" or type(h0))
coroutine.resume(co)
coroutine.wrap(function()
  local h2, m2, c2 = debug.gethook()
  print("wrapped", h2 == f, m2, c2)
end)()
-- Many coroutines, each made while a sample may be pending: the one-shot
-- hook armed on the maker (by a signal, or the allocator for the thread
-- itself) was copied into the new thread (15-77 of 200,000 had luaflame's
-- mask and count of 1; inside, the coroutine had lost the program's hook).
local bad = 0
for _ = 1, 50000 do
  local co = coroutine.create(function()
    local _, m2, c2 = debug.gethook()
    return m2 == "cl" and c2 == 7
  end)
  local _, m3, c3 = debug.gethook(co)
  local _, inside = coroutine.resume(co)
  if m3 ~= "cl" or c3 ~= 7 or not inside then bad = bad + 1 end
end
print("coroutines whose hook differs", bad)
debug.sethook()
print(debug.gethook())

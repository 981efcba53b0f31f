-- debug.gethook answers what the program set, as without luaflame, on
-- every version (5.4: one nil for no hook; 5.1-5.3: nil, "", 0), in every
-- mode: luaflame's own hook is not what it reports (as penlight's
-- pl.pretty.read, which saves the hook, turns it off and puts it back).
local function f() end
print(debug.gethook())
debug.sethook(f, "cl", 7)
local h, m, c = debug.gethook()
print(h == f, m, c)
debug.sethook()
print(debug.gethook())

-- The program turns its hook off and sets it again, over and over, as
-- penlight's pl.pretty.read does around each read (save the hook with
-- debug.gethook, debug.sethook(), then debug.sethook(h, m, c)). A signal
-- amid db_sethook's lua_sethook once read the hook half written, and the
-- program's hook came back with luaflame's mask ("cr", 0 on 5.1 while
-- tracing) or not at all while sampling. Prints the rounds whose hook
-- differs afterwards: 0, as without luaflame.
local function f() end
debug.sethook(f, "", 1000)
local bad, first = 0, nil
local t0 = os.clock()
repeat
  for _ = 1, 1000 do
    local h, m, c = debug.gethook()
    debug.sethook()
    debug.sethook(h, m, c)
    local h2, m2, c2 = debug.gethook()
    if h2 ~= f or m2 ~= "" or c2 ~= 1000 then
      bad = bad + 1
      first = first or (tostring(h2 == f) .. " " .. tostring(m2) .. " " .. tostring(c2))
    end
  end
until os.clock() - t0 > 0.4
debug.sethook()
print("rounds whose hook differs", bad, first)

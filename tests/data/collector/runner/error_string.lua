local function inner() error("something broke") end
local function outer() inner() end
io.write("before\n")
outer()

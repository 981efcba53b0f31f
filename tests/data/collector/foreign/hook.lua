local function my_hook() local x = 0 for i = 1, 400 do x = x + i end end
debug.sethook(my_hook, "", 1000)
local x = 0
for i = 1, 3e7 do x = x + i % 3 end
debug.sethook()
-- A count hook of the program's doing most of the work, as luacov's or a
-- debugger's (vm_test_lib.sh: vm_program_hook_check).
-- 3e7 rounds (about 1,100 samples at 999 Hz): with 1e7 (about 340) the
-- share in both mode once read 60% beside 72% in sample mode.

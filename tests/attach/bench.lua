-- A sysbench workload (attach_test.sh): the event function's known answer,
-- heavy three times light's iterations of the same work.
local function heavy(n) local s = 0 for i = 1, n do s = s + (i * 7) % 13 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + (i * 5) % 11 end return s end
function event()
  local t = heavy(3000000) + light(1000000)
  if t < 0 then print(t) end
end

-- dkjson encode/decode and an lpeg grammar (re) with a Lua callback: real
-- libraries' code, a C function calling back into Lua. Scale: arg[1].
local json = require "dkjson"
local re = require "re"
local scale = tonumber(arg and arg[1]) or 1
local doc = {}
for i = 1, 300 do doc[i] = {id = i, name = "item" .. i, tags = {"a", "b", tostring(i)}, nested = {x = i / 3, y = {i, i + 1}}} end
local words = 0
local grammar = re.compile("{| ( {%a+} -> count / . )* |}", {count = function(w) words = words + 1 return #w end})
local text = string.rep("hello world, the quick brown fox; ", 2000)
for _ = 1, math.floor(40 * scale) do
  local s = json.encode(doc)
  local back = json.decode(s)
  assert(#back == #doc)
  grammar:match(text)
end
print(words)

-- Debian's dkjson (pure Lua) encoding and decoding the Lua sources of the
-- libraries installed beside it: every file as a table of lines and
-- per-line token counts, to JSON and back, checked equal. The program's
-- output is the sizes it saw, the same on every run.
local json = require "dkjson"
local roots = {...}
local docs = {}
for _, root in ipairs(roots) do
  local list = assert(io.popen("find " .. root .. " -name '*.lua' | LC_ALL=C sort"))
  for f in list:lines() do
    local lines, tokens = {}, {}
    for line in io.lines(f) do
      lines[#lines + 1] = line
      local n = 0
      for _ in line:gmatch("[%w_]+") do n = n + 1 end
      tokens[#tokens + 1] = n
    end
    docs[#docs + 1] = {file = f, lines = lines, tokens = tokens}
  end
  list:close()
end
local bytes, checked = 0, 0
for round = 1, 3 do
  local text = json.encode({round = round, docs = docs}, {indent = round == 2})
  local back, _, err = json.decode(text)
  assert(back, err)
  for i, d in ipairs(docs) do
    local b = back.docs[i]
    assert(b.file == d.file and #b.lines == #d.lines)
    for k = 1, #d.lines do assert(b.lines[k] == d.lines[k] and b.tokens[k] == d.tokens[k]) end
    checked = checked + 1
  end
  bytes = bytes + #text
end
print(("dkjson: %d files, %d documents checked, %d bytes of JSON"):format(#docs, checked, bytes))

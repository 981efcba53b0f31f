-- Run by Debian's busted: Penlight's string, list, table and text functions
-- over the Lua sources of Penlight itself (real code on real data).
local stringx = require "pl.stringx"
local tablex = require "pl.tablex"
local List = require "pl.List"
local pretty = require "pl.pretty"
local path = require "pl.path"
local dir = require "pl.dir"

local root = path.dirname(package.searchpath("pl.init", package.path))
local files = dir.getfiles(root, "*.lua")
table.sort(files)

describe("penlight over its own sources", function()
  it("splits, strips and counts every line", function()
    local words = 0
    for _, f in ipairs(files) do
      local text = assert(io.open(f)):read("a")
      for _, line in ipairs(stringx.splitlines(text)) do
        local parts = stringx.split(stringx.strip(line))
        words = words + #parts
      end
    end
    assert.is_true(words > 10000)
  end)
  it("builds, maps and sorts lists of identifiers", function()
    local seen = {}
    for _, f in ipairs(files) do
      local text = assert(io.open(f)):read("a")
      local ids = List()
      for id in text:gmatch("[%a_][%w_]*") do ids:append(id) end
      local upper = ids:map(string.upper)
      assert.are.equal(#ids, #upper)
      for _, id in ipairs(ids:sort()) do seen[id] = (seen[id] or 0) + 1 end
    end
    local keys = tablex.keys(seen)
    assert.is_true(#keys > 1000)
  end)
  it("round-trips tables through pl.pretty", function()
    for i = 1, 40 do
      local t = {name = files[i % #files + 1], n = i, list = {1, 2, 3, {x = i}}}
      local back = pretty.read(pretty.write(t))
      assert.are.same(t, back)
    end
  end)
end)

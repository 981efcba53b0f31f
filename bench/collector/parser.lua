-- A call-heavy recursive-descent program: a JSON parser and an expression
-- evaluator run over generated input. Usage: lua5.4 parser.lua [SCALE].
local scale = tonumber(arg and arg[1]) or 1

local Json = {}

local function skip(s, i)
  local _, e = s:find("^[ \n\r\t]*", i)
  return e + 1
end

local parse_value

local function parse_string(s, i)
  local j = i + 1
  local buf = {}
  while true do
    local c = s:sub(j, j)
    if c == '"' then return table.concat(buf), j + 1 end
    if c == "\\" then j = j + 1 c = s:sub(j, j) end
    buf[#buf + 1] = c
    j = j + 1
  end
end

local function parse_number(s, i)
  local _, e = s:find("^-?%d+%.?%d*", i)
  return tonumber(s:sub(i, e)), e + 1
end

local function parse_array(s, i)
  local arr = {}
  i = skip(s, i + 1)
  if s:sub(i, i) == "]" then return arr, i + 1 end
  while true do
    local v
    v, i = parse_value(s, i)
    arr[#arr + 1] = v
    i = skip(s, i)
    local c = s:sub(i, i)
    i = i + 1
    if c == "]" then return arr, i end
    i = skip(s, i)
  end
end

local function parse_object(s, i)
  local obj = {}
  i = skip(s, i + 1)
  if s:sub(i, i) == "}" then return obj, i + 1 end
  while true do
    local k
    k, i = parse_string(s, i)
    i = skip(s, i) + 1
    i = skip(s, i)
    obj[k], i = parse_value(s, i)
    i = skip(s, i)
    local c = s:sub(i, i)
    i = i + 1
    if c == "}" then return obj, i end
    i = skip(s, i)
  end
end

function parse_value(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then return parse_object(s, i) end
  if c == "[" then return parse_array(s, i) end
  if c == '"' then return parse_string(s, i) end
  if s:sub(i, i + 3) == "true" then return true, i + 4 end
  if s:sub(i, i + 4) == "false" then return false, i + 5 end
  if s:sub(i, i + 3) == "null" then return nil, i + 4 end
  return parse_number(s, i)
end

function Json.decode(s)
  local v = parse_value(s, 1)
  return v
end

local function encode(v, out)
  local t = type(v)
  if t == "table" then
    if #v > 0 then
      out[#out + 1] = "["
      for i, x in ipairs(v) do
        if i > 1 then out[#out + 1] = "," end
        encode(x, out)
      end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local first = true
      for k, x in pairs(v) do
        if not first then out[#out + 1] = "," end
        first = false
        out[#out + 1] = '"' .. k .. '":'
        encode(x, out)
      end
      out[#out + 1] = "}"
    end
  elseif t == "string" then
    out[#out + 1] = '"' .. v .. '"'
  else
    out[#out + 1] = tostring(v)
  end
end

function Json.encode(v)
  local out = {}
  encode(v, out)
  return table.concat(out)
end

-- Expressions: expr = term {(+|-) term}; term = factor {(*|/) factor};
-- factor = number | '(' expr ')' | '-' factor.
local Expr = {}
local expr

local function factor(p)
  local c = p.s:sub(p.i, p.i)
  if c == "(" then
    p.i = p.i + 1
    local v = expr(p)
    p.i = p.i + 1
    return v
  elseif c == "-" then
    p.i = p.i + 1
    return -factor(p)
  end
  local _, e = p.s:find("^%d+", p.i)
  local v = tonumber(p.s:sub(p.i, e))
  p.i = e + 1
  return v
end

local function term(p)
  local v = factor(p)
  while true do
    local c = p.s:sub(p.i, p.i)
    if c == "*" then p.i = p.i + 1 v = v * factor(p)
    elseif c == "/" then p.i = p.i + 1 v = v / factor(p)
    else return v end
  end
end

function expr(p)
  local v = term(p)
  while true do
    local c = p.s:sub(p.i, p.i)
    if c == "+" then p.i = p.i + 1 v = v + term(p)
    elseif c == "-" then p.i = p.i + 1 v = v - term(p)
    else return v end
  end
end

function Expr.eval(s)
  return expr({s = s, i = 1})
end

local function make_doc(depth, width, seed)
  if depth == 0 then
    seed = (seed * 1103515245 + 12345) % 2147483648
    if seed % 3 == 0 then return "s" .. seed % 1000 end
    return seed % 10000
  end
  local t = {}
  for i = 1, width do
    if i % 2 == 0 then t[i] = make_doc(depth - 1, width, seed + i)
    else t[i] = {name = "n" .. i, value = make_doc(depth - 1, width, seed * 3 + i), ok = true} end
  end
  return t
end

local function make_expr(depth, seed)
  if depth == 0 then return tostring(seed % 97 + 1) end
  local ops = {"+", "-", "*"}
  return "(" .. make_expr(depth - 1, seed * 7 + 1) .. ops[seed % 3 + 1] .. make_expr(depth - 1, seed * 13 + 5) .. ")"
end

local text = Json.encode(make_doc(4, 6, 1))
local exprs = {}
for i = 1, 20 do exprs[i] = make_expr(7, i) end
local total = 0
for round = 1, math.floor(100 * scale) do
  local doc = Json.decode(text)
  total = total + #Json.encode(doc)
  for _, e in ipairs(exprs) do total = total + Expr.eval(e) end
end
print("parser checksum", total, #text)

// Allocation attribution in-process (alloc mode, sampled and exact): bytes
// charged to the Lua function that allocated them, live bytes under their
// keeper, the garbage collector's own allocations under [GC], the program's
// allocator restored. No clock is measured: these cases run beside others.
#include "collector_test_util.hpp"

using namespace lfct;

TEST_CASE(
    "alloc: a function making 90% of the garbage has about 90% of the bytes (sampled and exact)") {
  for (std::string rate : {"65536", "0"}) {
    CAPTURE(rate);
    Lua lua;
    std::string err = lua.run(std::string(R"(
      local lf = require 'luaflame'
      local function big() for i = 1, 900 do local s = string.rep('a', 100000) end end
      local function small() for i = 1, 100 do local s = string.rep('b', 100000) end end
      lf.start{mode = 'alloc', alloc_rate = )") +
                              rate + R"(}
      for i = 1, 3 do big() small() end
      BYTES = lf.folded('alloc_bytes')
      S = lf.stop()
    )");
    REQUIRE(err == "");
    Folded f = parse_folded(lua.global("BYTES"));
    double big = share_containing(f, "big "), small = share_containing(f, "small ");
    CAPTURE(lua.global("BYTES"));
    CHECK(std::fabs(big / (big + small) * 100 - 90) <= 5);
    CHECK(big + small > 95);  // nearly everything is attributed to the two
    // The estimate of the total is right within 10%: string.rep fills a
    // 100000-byte buffer, then makes the 100000-byte string.
    CHECK(std::fabs(total(f) - 2 * 3 * 1000 * 100000.0) / (2 * 3 * 1000 * 100000.0) < 0.10);
  }
}

// Regression (issue 10): allocations were charged at the next hook event,
// so tables built right before a C call landed on the C function (99% on
// [C] string.find, {i, tostring(i) .. "x"} on [C] tostring).
TEST_CASE(
    "alloc: a table built right before a C call is charged to the Lua function that built it") {
  for (std::string rate : {"16384", "0"}) {
    CAPTURE(rate);
    Lua lua;
    std::string err = lua.run(R"(
      local lf = require 'luaflame'
      function work()
        local n = 0
        for i = 1, 100000 do
          local t = {i, i + 1, i + 2}
          if string.find('abc', 'b', 1, true) then n = n + #t end
        end
      end
      function conv() local r for i = 1, 50000 do r = {i, tostring(i) .. 'x'} end end
      lf.start{mode = 'alloc', alloc_rate = )" +
                              rate + R"(}
      work() conv()
      BYTES = lf.folded('alloc_bytes')
      lf.stop()
    )");
    REQUIRE(err == "");
    Folded f = parse_folded(lua.global("BYTES"));
    CAPTURE(lua.global("BYTES"));
    double tables = 0, under_c = 0;
    for (const auto& kv : f) {
      if (kv.first.find("[alloc] table") == std::string::npos) continue;
      tables += kv.second;
      if (kv.first.find("[C] string.find") != std::string::npos ||
          kv.first.find("[C] tostring") != std::string::npos)
        under_c += kv.second;
    }
    CHECK(tables > 0);
    CHECK(under_c / tables < 0.01);
    CHECK(share_leaf(f, "[alloc] table") > 20);
  }
}

// Regression (issue 10): a function keeping 10% of the bytes alive had 0%
// of live_bytes, the one churning 90% (all freed) had 100%. Whatever holds
// the kept objects, they are under the keeper.
TEST_CASE("alloc: live bytes of a keeper are under the keeper, whatever container holds them") {
  struct Case {
    const char* container;
    const char* setup;  ///< defines put(v)
  };
  const Case cases[] = {
      {"global", "KEPT = {} function put(v) KEPT[#KEPT + 1] = v end"},
      {"upvalue", "local kept = {} function put(v) kept[#kept + 1] = v end"},
      {"registry",
       "local reg = debug.getregistry() reg.kept = {} function put(v) reg.kept[#reg.kept + 1] = v "
       "end"},
      {"local table",
       "local holder = {list = {}} function put(v) local l = holder.list l[#l + 1] = v end"},
  };
  for (std::string rate : {"16384", "0"}) {
    for (const Case& c : cases) {
      const std::string container = c.container;
      CAPTURE(rate);
      CAPTURE(container);
      Lua lua;
      std::string err = lua.run(std::string(R"(
        local lf = require 'luaflame'
        )") + c.setup + R"(
        local function churn() for i = 1, 9000 do local t = {i, i, i, i, i, i, i, i} end end
        local function keep() for i = 1, 1000 do put({i, i, i, i, i, i, i, i}) end end
        lf.start{mode = 'alloc', alloc_rate = )" +
                                rate + R"(, output = 'alloc_keeper_test.folded'}
        for r = 1, 4 do churn() keep() end
        lf.stop()
      )");
      REQUIRE(err == "");
      Folded live = parse_folded(read_file("alloc_keeper_test.live_bytes.folded"));
      CAPTURE(read_file("alloc_keeper_test.live_bytes.folded"));
      CHECK(share_containing(live, "keep ") >= 90);
      for (const char* f : {"alloc_keeper_test.folded", "alloc_keeper_test.alloc_count.folded",
                            "alloc_keeper_test.live_bytes.folded"})
        std::remove(f);
    }
  }
}

TEST_CASE("alloc: a leak shows in live bytes, an equal churn that is freed does not") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    LEAK = {}
    local function leak() for i = 1, 2000 do LEAK[#LEAK + 1] = string.rep('x', 5000) .. i end end
    local function churn() for i = 1, 2000 do local s = string.rep('y', 5000) .. i end end
    lf.start{mode = 'alloc', alloc_rate = 16384}
    leak() churn()
    S = lf.stop()
    LIVE = table.concat(S.files, ' ')
  )");
  REQUIRE(err == "");
  // Live bytes come from the summary and the folded text after stop: read
  // them through a second session-less path, the summary's totals.
  lua_getglobal(lua.L, "S");
  lua_getfield(lua.L, -1, "live_bytes");
  double live = lua_tonumber(lua.L, -1);
  lua_pop(lua.L, 2);
  CHECK(live > 0.7 * 2000 * 5000);
  CHECK(live < 1.5 * 2 * 2000 * 5000);
}

TEST_CASE("alloc: live bytes by stack: the leak's frames, not the churn's") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    LEAK = {}
    local function leak() for i = 1, 2000 do LEAK[#LEAK + 1] = string.rep('x', 5000) .. i end end
    local function churn() for i = 1, 2000 do local s = string.rep('y', 5000) .. i end end
    lf.start{mode = 'alloc', alloc_rate = 16384, output = 'alloc_live_test.folded'}
    leak() churn()
    lf.stop()
  )");
  REQUIRE(err == "");
  Folded live = parse_folded(read_file("alloc_live_test.live_bytes.folded"));
  Folded bytes = parse_folded(read_file("alloc_live_test.folded"));
  CAPTURE(read_file("alloc_live_test.live_bytes.folded"));
  CHECK(share_containing(live, "leak ") > 90);
  CHECK(share_containing(live, "churn ") < 5);
  CHECK(std::fabs(share_containing(bytes, "leak ") - share_containing(bytes, "churn ")) < 15);
  for (const char* f : {"alloc_live_test.folded", "alloc_live_test.alloc_count.folded",
                        "alloc_live_test.live_bytes.folded"})
    std::remove(f);
}

TEST_CASE("alloc: blocks from before the session are freed safely, the allocator is restored") {
  Lua lua;
  void* ud0 = nullptr;
  lua_Alloc before = lua_getallocf(lua.L, &ud0);
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    OLD = {}
    for i = 1, 20000 do OLD[i] = {i} end
    for round = 1, 3 do
      lf.start{mode = 'sample+alloc', alloc_rate = 0}
      if round == 1 then OLD = nil end
      collectgarbage()
      local t = {}
      for i = 1, 1000 do t[i] = tostring(i) end
      local s = lf.stop()
      assert(s.alloc_count >= 1000, 'allocations: ' .. s.alloc_count)
      assert(s.live_bytes >= 0)
    end
  )");
  CHECK(err == "");
  void* ud1 = nullptr;
  CHECK((lua_getallocf(lua.L, &ud1) == before));
  CHECK(ud1 == ud0);
}

namespace {

// The program's own allocator, as a host or a C module installs one while
// the state runs: it wraps the allocator it finds (luaflame's, in alloc mode)
// and counts. Static: the state is closed through it at the end.
struct Counting {
  lua_Alloc inner = nullptr;
  void* inner_ud = nullptr;
  long calls = 0;
} g_counting;

void* counting_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* c = static_cast<Counting*>(ud);
  ++c->calls;
  return c->inner(c->inner_ud, ptr, osize, nsize);
}

int lua_wrap_alloc(lua_State* L) {
  g_counting.inner = lua_getallocf(L, &g_counting.inner_ud);
  lua_setallocf(L, counting_alloc, &g_counting);
  return 0;
}

int lua_counted(lua_State* L) {
  lua_pushinteger(L, g_counting.calls);
  return 1;
}

}  // namespace

// Issue 27: a program that installs its own allocator while luaflame's is in
// place keeps it: stop leaves the program's allocator (and luaflame's under
// it, passing through), every block is freed by the allocator that made it.
TEST_CASE("alloc: a program's own allocator installed during the session stays after stop") {
  Lua lua;
  lua_register(lua.L, "wrap_alloc", lua_wrap_alloc);
  lua_register(lua.L, "counted", lua_counted);
  const std::string err = lua.run(R"(
    local lf = require 'luaflame'
    lf.start{mode = 'sample+alloc', alloc_rate = 0}
    local keep = {}
    for i = 1, 5000 do keep[i] = {i} end
    wrap_alloc()
    for i = 5001, 10000 do keep[i] = tostring(i) end
    local s = lf.stop()
    assert(s.alloc_count >= 5000, 'allocations: ' .. s.alloc_count)
    local before = counted()
    keep = nil
    collectgarbage()
    local t = {} for i = 1, 1000 do t[i] = {i} end
    AFTER = counted() - before
  )");
  REQUIRE(err == "");
  CHECK(std::stol(lua.global("AFTER")) > 1000);
  void* ud = nullptr;
  CHECK((lua_getallocf(lua.L, &ud) == counting_alloc));
  CHECK(ud == &g_counting);
}

// Bytes of the stacks that hold a "[GC]" frame; every such frame must sit
// right above an "[alloc] ..." leaf.
double gc_bytes(const Folded& f, double* gc_strings) {
  double in = 0;
  *gc_strings = 0;
  for (const auto& kv : f) {
    std::string s = ";" + kv.first;
    auto at = s.find(";[GC];");
    if (at == std::string::npos) continue;
    std::string rest = s.substr(at + 6);
    CHECK(rest.rfind("[alloc] ", 0) == 0);
    CHECK(rest.find(';') == std::string::npos);
    in += kv.second;
    if (rest == "[alloc] string") *gc_strings += kv.second;
  }
  return in;
}

TEST_CASE("alloc: allocations made inside the garbage collector sit under [GC] (exact mode)") {
  // Each finalizer makes one 1000-byte string (a long string: 24 + 1001
  // bytes, never interned); the collector runs them, so they are its bytes.
  // Short-string churn makes the string table grow (user code) and shrink
  // in checkSizes during GC steps (a shrink allocates no new bytes).
  struct Case {
    const char* name;
    const char* before;
    const char* after;
    bool gc;
  };
  const Case cases[] = {
      {"finalizers, GC running", "collectgarbage('setpause', 100)",
       "collectgarbage() collectgarbage()", true},
      {"GC stopped", "collectgarbage('stop')", "", false},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.name));
    Lua lua;
    std::string err = lua.run(std::string(R"(
      local lf = require 'luaflame'
      local K = 2000
      MADE = 0
      local mt = {__gc = function(o) MADE = MADE + 1; KEEP = string.rep('g', 1000) end}
      local function churn()
        for i = 1, K do setmetatable({i}, mt) end
        for r = 1, 5 do
          local t = {}
          for i = 1, 20000 do t[i] = 's' .. r .. '_' .. i end
        end
      end
      )") + c.before + R"(
      lf.start{mode = 'alloc', alloc_rate = 0}
      churn()
      )" + c.after + R"(
      BYTES = lf.folded('alloc_bytes')
      RAN = MADE  -- finalizers run while profiling (stop's collections run the rest)
      S = lf.stop()
      collectgarbage('restart')
    )");
    REQUIRE(err == "");
    Folded f = parse_folded(lua.global("BYTES"));
    CAPTURE(lua.global("RAN"));
    double strings = 0, in_gc = gc_bytes(f, &strings);
    CAPTURE(in_gc);
    if (c.gc) {
      REQUIRE(lua.global("RAN") == "2000");
      CHECK(strings >= 2000 * 1025.0);
      CHECK(in_gc <= 2000 * 1025.0 * 1.1 + 65536);
      // The rest (the objects, the short strings, the tables) is the program's.
      CHECK(total(f) - in_gc > 5 * 20000 * 25.0);
    } else {
      CHECK(lua.global("RAN") == "0");
      CHECK(in_gc == 0);
      CHECK(total(f) > 5 * 20000 * 25.0);
    }
  }
}

TEST_CASE("alloc: string churn across GC cycles: the collector itself allocates no new bytes") {
  // Regression guard for the [GC] check: steps run (the string table grows
  // in user code and shrinks in checkSizes) but nothing grows inside a step.
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    collectgarbage('setpause', 100)
    lf.start{mode = 'alloc', alloc_rate = 0}
    for r = 1, 4 do
      local t = {}
      for i = 1, 20000 do t[i] = 'c' .. r .. '_' .. i end
      t = nil
      collectgarbage()
    end
    BYTES = lf.folded('alloc_bytes')
    lf.stop()
  )");
  REQUIRE(err == "");
  Folded f = parse_folded(lua.global("BYTES"));
  double strings = 0;
  CHECK(gc_bytes(f, &strings) == 0);
  CHECK(total(f) > 4 * 20000 * 25.0);
}

// Fault injection (issue 27): a program profiled in every mode, run again and
// again under an allocator that fails its Nth allocation, for every N over the
// whole run. Whatever allocation fails (the program's, or one luaflame makes
// through the state in start, a hook, a wrapper or stop), the program gets
// Lua's own memory error or finishes, never a crash, another error, a hang or
// a leak (the sanitize job runs this under ASan+UBSan and LeakSanitizer).
#include <cstdlib>
#include <string>

#include "../support/skip.hpp"
#include "collector_test_util.hpp"

namespace {

// Counts allocations and fails the `fail_at`-th that asks for more memory
// and the one after (Lua's contract: a free or a shrink never fails).
struct FailingAlloc {
  long count = 0;
  long fail_at = -1;  ///< -1: never
  bool armed = false;
  static void* fn(void* ud, void* ptr, size_t osize, size_t nsize) {
    auto* a = static_cast<FailingAlloc*>(ud);
    if (nsize == 0) {
      std::free(ptr);
      return nullptr;
    }
    const bool grows = !ptr || nsize > osize;
    // The Nth and the next: Lua retries a failed allocation once after an
    // emergency collection (lmem.c, tryagain), so one failure alone is absorbed.
    if (a->armed && grows && ++a->count >= a->fail_at && a->count <= a->fail_at + 1 &&
        a->fail_at > 0)
      return nullptr;
    return std::realloc(ptr, nsize);
  }
};

const char* const kProgram = R"(
local lf = require 'luaflame'
lf.start{mode = MODE, hz = 10000, alloc_rate = 0}
local t = {}
for i = 1, 120 do t[i] = {tostring(i), string.rep('x', i % 13)} end
local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
co() co()
local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end
f(40)
setmetatable({}, {__gc = function() t = nil end})
collectgarbage()
debug.sethook(function() end, '', 100)
for i = 1, 300 do t = {i} end
debug.sethook()
local s = lf.stop()
return s.mode
)";

// A real program: Debian's luacheck (lua-check, installed for 5.1's paths,
// runs unchanged on 5.4) over three Penlight modules, through its API.
const char* const kLuacheck = R"(
package.path = '/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;' .. package.path
local lf = require 'luaflame'
lf.start{mode = MODE, hz = 10000, alloc_rate = 0}
local luacheck = require 'luacheck'
local dir = '/usr/share/lua/5.1/pl/'
local r = luacheck.check_files({dir .. 'List.lua', dir .. 'utils.lua', dir .. 'stringx.lua'})
lf.stop()
return r.warnings .. ' warnings, ' .. r.errors .. ' errors, ' .. r.fatals .. ' fatal'
)";

// One run of `program` with the Nth allocation failing (-1: none). Returns
// Lua's status, the message or result in `msg`, the allocations in `count`.
int run_once(const char* mode, long fail_at, std::string& msg, long& count,
             const char* program = kProgram) {
  FailingAlloc a;
  lua_State* L = lua_newstate(FailingAlloc::fn, &a);
  REQUIRE(L);
  luaL_openlibs(L);
  lfc::preload_module(L);
  lua_pushstring(L, mode);
  lua_setglobal(L, "MODE");
  a.fail_at = fail_at;
  a.armed = true;
  int st = luaL_loadbuffer(L, program, std::strlen(program), "=faults");
  if (st == LUA_OK) st = lua_pcall(L, 0, 1, 0);
  const char* m = lua_tostring(L, -1);
  msg = m ? m : "";
  a.armed = false;
  if (lfc::running(L)) lfc::stop(L);
  lua_close(L);
  count = a.count;
  return st;
}

}  // namespace

TEST_CASE("faults: any allocation failing, in every mode: Lua's memory error or success") {
  const char* stride_env = std::getenv("LUAFLAME_FAULT_STRIDE");
  const long stride = stride_env && std::atol(stride_env) > 0 ? std::atol(stride_env) : 1;
  for (const std::string mode : {"sample", "both", "trace", "sample+alloc"}) {
    CAPTURE(mode);
    std::string msg;
    long total = 0;
    REQUIRE(run_once(mode.c_str(), -1, msg, total) == LUA_OK);
    CHECK(msg == mode);
    CHECK(total > 100);
    long failed = 0, ok = 0;
    for (long n = 1; n <= total + 1; n += stride) {
      CAPTURE(n);
      long count = 0;
      const int st = run_once(mode.c_str(), n, msg, count);
      CAPTURE(msg);
      if (st == LUA_OK) {
        ++ok;
        continue;
      }
      ++failed;
      // Lua's own memory error, however it reached the program: raised (ERRMEM)
      // or caught and re-raised with its message (a pcall in a library).
      CHECK((st == LUA_ERRMEM || msg.find("not enough memory") != std::string::npos));
    }
    MESSAGE(mode << ": " << total << " allocations; " << failed << " runs got the memory error, "
                 << ok << " finished");
    CHECK(failed > 0);
  }
}

// luacheck over Penlight, a spread of 24 N over its run in every mode: the
// same report as unprofiled, or Lua's memory error (luacheck's own pcall may
// turn it into a fatal error of one file: that report says "1 fatal").
TEST_CASE("faults: luacheck over penlight with an allocation failing, in every mode") {
  if (!std::ifstream("/usr/share/lua/5.1/luacheck/init.lua"))
    lft::skip_case("lua-check is not installed (scripts/install-deps.sh --test installs it)");
  for (const std::string mode : {"sample", "both", "trace", "sample+alloc"}) {
    CAPTURE(mode);
    std::string expected;
    long total = 0;
    REQUIRE(run_once(mode.c_str(), -1, expected, total, kLuacheck) == LUA_OK);
    CAPTURE(expected);
    CHECK(expected.find(" 0 fatal") != std::string::npos);
    long failed = 0, same = 0, fatal = 0;
    for (long k = 1; k <= 24; ++k) {
      const long n = total * k / 25;
      CAPTURE(n);
      std::string msg;
      long count = 0;
      const int st = run_once(mode.c_str(), n, msg, count, kLuacheck);
      CAPTURE(msg);
      if (st == LUA_OK && msg == expected) {
        ++same;
      } else if (st == LUA_OK) {
        ++fatal;
        CHECK(msg.find(" 0 fatal") == std::string::npos);
      } else {
        ++failed;
        CHECK((st == LUA_ERRMEM || msg.find("not enough memory") != std::string::npos));
      }
    }
    MESSAGE(mode << ": " << total << " allocations; of 24 runs " << failed
                 << " got the memory error, " << fatal << " a fatal report, " << same
                 << " the same report");
  }
}

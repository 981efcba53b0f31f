// Code that runs with hooks off (foreign.hpp): finalizers and the program's
// own hooks. Their time is the program's, charged to those functions, the
// same in sample and both mode, at the normal sampling cost; luaflame's own
// hook time is the profiler's, counted and left out unless show_profiler.
// They measure CPU shares, so each case runs alone (RUN_SERIAL).
#include <sched.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "collector_test_util.hpp"

using namespace lfct;

namespace {

// `body` defines main(); it is run from a file of its own (the names of
// functions the handler copies come from their definition's text, which a
// file has whole), unprofiled or under `start` options. Returns the folded
// samples ("" unprofiled) and sets `seconds` to the CPU time main() took
// and `in_hooks` to the summary's samples_in_hooks.
std::string run_file(const std::string& body, const std::string& start, double& seconds,
                     std::string* in_hooks = nullptr) {
  const std::string path = "foreign_test_" + std::to_string(::getpid()) + ".lua";
  {
    std::ofstream out(path);
    out << body;
  }
  Lua lua;
  std::string code = "local lf = require 'luaflame'\ndofile('" + path + "')\n";
  if (!start.empty()) code += "lf.start{" + start + "}\n";
  code += "local t0 = os.clock()\nmain()\nSECONDS = os.clock() - t0\n";
  if (!start.empty()) code += "F = lf.folded()\nIN_HOOKS = lf.stop().samples_in_hooks\n";
  const std::string err = lua.run(code);
  std::remove(path.c_str());
  REQUIRE(err == "");
  seconds = std::stod(lua.global("SECONDS"));
  if (in_hooks) *in_hooks = lua.global("IN_HOOKS");
  return lua.global("F");
}

// 3,000 finalizers run by one collectgarbage(), each spinning: nearly all of
// the program's time is in `finalize` (the issue's case: 100% of its samples
// went to "[luaflame] hook" and it ran 4x slower at 1 kHz).
const char* const kFinalizers = R"(
local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function finalize(o) spin(4000) end
function main()
  for round = 1, 4 do
    for i = 1, 3000 do setmetatable({}, {__gc = finalize}) end
    collectgarbage()
  end
end
)";

// A count hook doing most of the work, as luacov or a debugger's does.
const char* const kProgramHook = R"(
local function my_hook() local x = 0 for i = 1, 400 do x = x + i end end
function main()
  debug.sethook(my_hook, "", 1000)
  local x = 0
  for i = 1, 2e7 do x = x + i % 3 end
  debug.sethook()
end
)";

}  // namespace

TEST_CASE("foreign: finalizer time is charged to the finalizer, the same in sample and both mode") {
  for (const char* mode : {"sample", "both"}) {
    CAPTURE(mode);
    double secs = 0;
    std::string in_hooks;
    const std::string text =
        run_file(kFinalizers, std::string("mode = '") + mode + "', hz = 999", secs, &in_hooks);
    const Folded f = parse_folded(text);
    CAPTURE(text);
    CHECK(total(f) > 100);
    // Under the frame that ran collectgarbage, as Lua's own traceback has it.
    CHECK(share_containing(f, "finalize ") >= 85);
    CHECK(share_containing(f, "[luaflame]") == 0);
    CHECK(text.find("main ") != std::string::npos);
    CHECK(std::stod(in_hooks) <= 0.05 * total(f));
  }
}

// The calling thread kept on the CPU it is on, until destroyed: one of a
// VM's cores ran the finalizer program 1.5-1.75x slower than the other for
// minutes (tests/collector/vm_test_lib.sh), so both sides of a timing
// comparison run on one.
struct PinnedHere {
  cpu_set_t before{};
  bool pinned = false;
  PinnedHere() {
    const int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof before, &before) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedHere() {
    if (pinned) sched_setaffinity(0, sizeof before, &before);
  }
  PinnedHere(const PinnedHere&) = delete;
  PinnedHere& operator=(const PinnedHere&) = delete;
};

// Regression: the one-shot hook armed with a count of 1 inside a finalizer
// (where no hook can fire) made every finalizer instruction pay for an
// event: 4x slower at 1 kHz. Now it is armed on the thread's own events
// there. CPU time of main(), best of three each, interleaved, on one CPU;
// the bound is far from the 4x it guards against (docs/benchmarks.md has
// the figures).
TEST_CASE("foreign: a finalizer-heavy program is not slowed by sampling") {
  const PinnedHere pin;
  double plain = 1e9, profiled = 1e9;
  for (int i = 0; i < 3; ++i) {
    double s = 0;
    run_file(kFinalizers, "", s);
    plain = std::min(plain, s);
    run_file(kFinalizers, "mode = 'sample', hz = 999", s);
    profiled = std::min(profiled, s);
  }
  CAPTURE(plain);
  CAPTURE(profiled);
  CHECK(profiled < 1.5 * plain);
}

// The issue's case: 86.5% of a sample run on "[luaflame] hook", 0% in both mode.
TEST_CASE("foreign: a program's own hook is charged to its function, the same in every mode") {
  double shares[2] = {0, 0};
  int at = 0;
  for (const char* mode : {"sample", "both"}) {
    CAPTURE(mode);
    double secs = 0;
    const std::string text =
        run_file(kProgramHook, std::string("mode = '") + mode + "', hz = 999", secs);
    const Folded f = parse_folded(text);
    CAPTURE(text);
    CHECK(total(f) > 100);
    CHECK(share_containing(f, "[luaflame]") == 0);
    shares[at++] = share_containing(f, "my_hook ");
  }
  CAPTURE(shares[0]);
  CAPTURE(shares[1]);
  CHECK(shares[0] >= 50);
  CHECK(std::fabs(shares[0] - shares[1]) <= 10);
}

TEST_CASE("show_profiler: luaflame's own hook time is left out unless asked for") {
  const char* const calls = R"(
local function tiny(x) return x + 1 end
function main()
  local t0, x = os.clock(), 0
  while os.clock() - t0 < 0.3 do for i = 1, 1000 do x = tiny(x) end end
end
)";
  double secs = 0;
  std::string hidden_count, shown_count;
  const std::string hidden = run_file(calls, "mode = 'both', hz = 999", secs, &hidden_count);
  const std::string shown =
      run_file(calls, "mode = 'both', hz = 999, show_profiler = true", secs, &shown_count);
  CAPTURE(hidden_count);
  CAPTURE(shown_count);
  CHECK(std::stod(hidden_count) > 0);
  CHECK(hidden.find("[luaflame] hook") == std::string::npos);
  CHECK(shown.find("[luaflame] hook") != std::string::npos);
  double leaf_hook = 0;
  for (const auto& kv : parse_folded(shown))
    if (kv.first.size() >= 15 && kv.first.compare(kv.first.size() - 15, 15, "[luaflame] hook") == 0)
      leaf_hook += kv.second;
  // The folded text is taken by luaflame.folded() just before luaflame.stop()
  // counts: a sample or two in luaflame's hook between them (while it runs
  // for those calls) is counted and not in the text (87 of 88 under qemu,
  // 242 of 243 under ASan).
  CHECK(leaf_hook <= std::stod(shown_count));
  CHECK(leaf_hook >= std::stod(shown_count) - 3);
}

namespace {

// fork() and waitpid() for the program (Debian 12's lua-posix has no 5.4 build).
int lua_fork(lua_State* L) {
  lua_pushinteger(L, ::fork());
  return 1;
}
int lua_wait(lua_State* L) {
  int status = 0;
  ::waitpid(static_cast<pid_t>(luaL_checkinteger(L, 1)), &status, 0);
  lua_pushinteger(L, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 1;
}

}  // namespace

// Regression (issue 27): a forked child ended the parent's session at its
// exit: it wrote the parent's output file (and would have joined the
// streamer thread it does not have). The child now runs on unprofiled.
TEST_CASE("fork: the child neither writes the parent's profile nor crashes") {
  // Under /tmp: a mode with alloc writes one file per metric beside OUT.
  char dir[] = "/tmp/luaflame_fork_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string out = std::string(dir) + "/fork_test.folded";
  Lua lua;
  lua_register(lua.L, "fork", lua_fork);
  lua_register(lua.L, "waitpid", lua_wait);
  lua_pushstring(lua.L, out.c_str());
  lua_setglobal(lua.L, "OUT");
  const std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function spin(n) local x = 0 for i = 1, n do x = x + i % 3 end return x end
    for _, mode in ipairs{'sample', 'both', 'sample+alloc'} do
      lf.start{mode = mode, hz = 999, output = OUT}
      spin(1e6)
      local pid = fork()
      if pid == 0 then
        spin(1e6)
        local t = {} for i = 1, 1e4 do t[i] = {i} end
        os.exit(0)  -- exit(): the atexit handlers run in the child
      end
      CHILD = waitpid(pid)
      if CHILD ~= 0 then return end
      WRITTEN_BY_CHILD = tostring(io.open(OUT) ~= nil)
      if WRITTEN_BY_CHILD == 'true' then return end
      spin(1e6)
      lf.stop()
      WRITTEN = tostring(io.open(OUT) ~= nil)
      os.remove(OUT)
    end
  )",
                                  "=fork_test");
  std::filesystem::remove_all(dir);
  REQUIRE(err == "");
  CHECK(lua.global("CHILD") == "0");
  CHECK(lua.global("WRITTEN_BY_CHILD") == "false");
  CHECK(lua.global("WRITTEN") == "true");
}

namespace {

// The program's own CPU profiler, as gperftools or a Lua binding of
// setitimer has it: a SIGPROF handler counting ticks of ITIMER_PROF.
volatile sig_atomic_t g_prof_ticks = 0;
void on_prof(int) {
  g_prof_ticks = g_prof_ticks + 1;
}
int lua_prof_timer(lua_State* L) {
  const long us = static_cast<long>(luaL_checkinteger(L, 1));
  if (us > 0) {
    struct sigaction sa {};
    sa.sa_handler = on_prof;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, nullptr);
  }
  const itimerval it{{0, us}, {0, us}};
  setitimer(ITIMER_PROF, &it, nullptr);
  if (us == 0) signal(SIGPROF, SIG_DFL);
  lua_pushinteger(L, g_prof_ticks);
  return 1;
}

}  // namespace

// Regression (issue 27): luaflame sampled with SIGPROF when it was free. A
// program that then set up its own SIGPROF profiler got luaflame's ticks in
// its handler (999 a second instead of its 100), and at stop luaflame put
// SIGPROF back to the default action: the program's next tick killed it.
TEST_CASE("signals: a program's own SIGPROF and setitimer work the same under luaflame") {
  Lua lua;
  lua_register(lua.L, "prof_timer", lua_prof_timer);
  const std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function spin(s) local t = os.clock() while os.clock() - t < s do end end
    lf.start{mode = 'sample', hz = 999}
    local t0 = prof_timer(10000)  -- 100 ticks a second of CPU time
    spin(0.3)
    F = lf.folded()
    lf.stop()
    spin(0.2)  -- its timer still runs after luaflame's stop, its handler too
    TICKS = prof_timer(0) - t0
  )");
  REQUIRE(err == "");
  const double ticks = std::stod(lua.global("TICKS"));
  CAPTURE(ticks);
  // 0.5 s of CPU time at 100 Hz: 50 (49-50 natively). A timer broken by
  // luaflame gives 0; luaflame's ticks in its handler, 500. Under qemu-user
  // at idle priority on a loaded machine (CI's arm64 job) 34 came once: a
  // standard signal is lost while the last one waits for qemu to deliver it,
  // and 24 in another run.
  CHECK(ticks >= 10);
  CHECK(ticks <= 70);
  CHECK(lua.global("F").find("spin") != std::string::npos);
}

// Unit tests of the collector in-process: a real Lua 5.4 state with the
// luaflame module preloaded, workloads with known answers.
//   - options, frame sanitising, folded export;
//   - trace call counts as data: tests/data/collector/trace/<case>.lua with
//     the expected <case>.calls.folded beside it (LUAFLAME_REGENERATE=1
//     rewrites them);
//   - sample and time shares, C functions, coroutines, hooks chained.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "../../collector/frames.hpp"
#include "../../collector/out_tree.hpp"
#include "../../collector/tree.hpp"
#include "luaflame/collector.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

namespace {

using Folded = std::map<std::string, double>;

Folded parse_folded(const std::string& text) {
  Folded f;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    f[line.substr(0, sp)] += std::stod(line.substr(sp + 1));
  }
  return f;
}

double total(const Folded& f) {
  double t = 0;
  for (const auto& kv : f) t += kv.second;
  return t;
}

// Share (percent) of the stacks that contain a frame starting with `name`.
double share_containing(const Folded& f, const std::string& name) {
  double in = 0;
  for (const auto& kv : f) {
    std::string s = ";" + kv.first;
    if (s.find(";" + name) != std::string::npos) in += kv.second;
  }
  return 100.0 * in / total(f);
}

// Share (percent) of the stacks whose leaf frame starts with `name`.
double share_leaf(const Folded& f, const std::string& name) {
  double in = 0;
  for (const auto& kv : f) {
    auto semi = kv.first.rfind(';');
    std::string leaf = semi == std::string::npos ? kv.first : kv.first.substr(semi + 1);
    if (leaf.rfind(name, 0) == 0) in += kv.second;
  }
  return 100.0 * in / total(f);
}

// A Lua state with the module preloaded; runs chunks, reads globals.
struct Lua {
  lua_State* L;
  Lua() : L(luaL_newstate()) {
    luaL_openlibs(L);
    lfc::preload_module(L);
  }
  ~Lua() {
    if (lfc::running()) lfc::stop(L);
    lua_close(L);
  }
  // Runs `code` (chunk name `name`); returns "" or the error with traceback.
  std::string run(const std::string& code, const std::string& name = "=test") {
    if (luaL_loadbuffer(L, code.data(), code.size(), name.c_str()) != LUA_OK) return pop_error();
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "traceback");
    lua_remove(L, -2);
    lua_insert(L, -2);
    int st = lua_pcall(L, 0, 0, -2);
    if (st != LUA_OK) return pop_error();
    lua_pop(L, 1);
    return "";
  }
  std::string pop_error() {
    std::string e = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
    lua_settop(L, 0);
    return e;
  }
  std::string global(const char* name) {
    lua_getglobal(L, name);
    std::string s = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
    lua_pop(L, 1);
    return s;
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("options: names, values and errors") {
  lfc::Options o;
  std::string err;
  CHECK(lfc::set_option(o, "mode", "both", err));
  CHECK((o.sample && o.trace && !o.alloc));
  CHECK(lfc::set_option(o, "mode", "sample+alloc", err));
  CHECK((o.sample && !o.trace && o.alloc));
  CHECK(lfc::set_option(o, "hz", "250", err));
  CHECK(o.hz == 250);
  CHECK_FALSE(lfc::set_option(o, "hz", "fast", err));
  CHECK(err.find("'hz'") != std::string::npos);
  CHECK_FALSE(lfc::set_option(o, "clock", "sundial", err));
  CHECK_FALSE(lfc::set_option(o, "nope", "1", err));
  CHECK(err.find("unknown option 'nope'") != std::string::npos);
  CHECK(lfc::set_option(o, "tags", "branch=main,ci=1", err));
  CHECK(o.tags.size() == 2);
  CHECK(o.tags["branch"] == "main");
  CHECK_FALSE(lfc::set_option(o, "tags", "novalue", err));
  CHECK_FALSE(lfc::set_option(o, "server", "ftp://x", err));
  CHECK(lfc::set_option(o, "flush_interval", "0.5", err));
  CHECK_FALSE(lfc::set_option(o, "flush_interval", "-1", err));
}

TEST_CASE("options: LUAFLAME_ environment variables") {
  setenv("LUAFLAME_HZ", "123", 1);
  setenv("LUAFLAME_MODE", "trace", 1);
  lfc::Options o;
  std::string err;
  CHECK(lfc::apply_env(o, err));
  CHECK(o.hz == 123);
  CHECK(o.trace);
  setenv("LUAFLAME_CLOCK", "bogus", 1);
  CHECK_FALSE(lfc::apply_env(o, err));
  CHECK(err.find("LUAFLAME_CLOCK") != std::string::npos);
  unsetenv("LUAFLAME_HZ");
  unsetenv("LUAFLAME_MODE");
  unsetenv("LUAFLAME_CLOCK");
}

TEST_CASE("output paths: first metric in the file, others beside it") {
  CHECK(lfc::output_path("out.folded", "samples", true) == "out.folded");
  CHECK(lfc::output_path("out.folded", "calls", false) == "out.calls.folded");
  CHECK(lfc::output_path("prof", "time", false) == "prof.time.folded");
}

TEST_CASE("frames: never a ';' or a line break, always valid UTF-8") {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"a;b", "a_b"},      {"x\ny\r", "x_y_"},      {"caf\xc3\xa9", "caf\xc3\xa9"},
      {"bad\xff", "bad?"}, {"\xe0\x80\x80", "???"}, {"tab\there", "tab_here"}};
  for (const auto& c : cases) {
    CAPTURE(c.in);
    std::string s = c.in;
    lfc::sanitize_frame(s);
    CHECK(s == c.out);
  }
}

TEST_CASE("tree: shared prefixes, folded export of self values") {
  lfc::FrameNames names;
  uint32_t a = names.add("a"), b = names.add("b"), c = names.add("c");
  lfc::Tree t(1);
  uint32_t na = t.child(0, a), nab = t.child(na, b), nac = t.child(na, c);
  CHECK(t.child(na, b) == nab);  // interned, not duplicated
  t.add(nab, 0, 3);
  t.add(nac, 0, 2);
  t.add(na, 0, 1);
  std::string out;
  // The one folded writer (out_tree.hpp), as luaflame.folded() uses it.
  const lfc::OutTree o = lfc::snapshot(
      t, names, [&](uint32_t n, int m) { return t.value(n, m); },
      [](std::size_t, std::string_view) { return uint64_t{0}; }, 0);
  lfc::write_folded_text(o, 0, [&](std::string_view l) { out.append(l); });
  CHECK(out == "a 1\na;b 3\na;c 2\n");
}

TEST_CASE("trace: exact call counts (tests/data/collector/trace)") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(LUAFLAME_TEST_DATA) / "collector" / "trace";
  const bool regen = std::getenv("LUAFLAME_REGENERATE") != nullptr;
  int cases = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".lua") continue;
    ++cases;
    const std::string name = e.path().stem().string();
    CAPTURE(name);
    Lua lua;
    lua_pushstring(lua.L, read_file(e.path().string()).c_str());
    lua_setglobal(lua.L, "CODE");
    lua_pushstring(lua.L, ("@" + name + ".lua").c_str());
    lua_setglobal(lua.L, "CHUNKNAME");
    std::string err = lua.run(
        "local lf = require 'luaflame'\n"
        "local f = assert(load(CODE, CHUNKNAME))\n"
        "lf.start{mode = 'trace'}\n"
        "f()\n"
        "CALLS = lf.folded('calls')\n"
        "lf.stop()\n",
        "=harness");
    REQUIRE(err == "");
    const fs::path expected = dir / (name + ".calls.folded");
    if (regen) std::ofstream(expected, std::ios::binary) << lua.global("CALLS");
    CHECK(lua.global("CALLS") == read_file(expected.string()));
  }
  CHECK(cases >= 4);
}

// The kernel timer (default) and the polling-thread fallback
// (LUAFLAME_SAMPLER=thread) must give the same answer at the asked rate.
TEST_CASE(
    "sample: a function with three quarters of the CPU time has 75% of the samples, within 5 "
    "points, with either sampler") {
  for (const std::string sampler : {"timer", "thread"}) {
    CAPTURE(sampler);
    if (sampler == "thread")
      setenv("LUAFLAME_SAMPLER", "thread", 1);
    else
      unsetenv("LUAFLAME_SAMPLER");
    Lua lua;
    std::string err = lua.run(R"(
      local lf = require 'luaflame'
      local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
      function hot() local r = spin(3000000) return r end
      function cold() local r = spin(1000000) return r end
      lf.start{mode = 'both', hz = 999}
      for i = 1, 12 do hot() cold() end
      SAMPLES = lf.folded('samples')
      TIME = lf.folded('time')
      STATS = lf.stop()
      DELIVERED = STATS.sample_events / (STATS.clock_ns / 1e6)
      WEIGHT = STATS.samples / (STATS.clock_ns / 1e6)
      SAMPLER = STATS.sampler
    )");
    unsetenv("LUAFLAME_SAMPLER");
    REQUIRE(err == "");
    CHECK(lua.global("SAMPLER") == sampler);
    Folded samples = parse_folded(lua.global("SAMPLES"));
    Folded time = parse_folded(lua.global("TIME"));
    double hot_s = share_containing(samples, "hot "), hot_t = share_containing(time, "hot ");
    CAPTURE(lua.global("SAMPLES"));
    CHECK(std::fabs(hot_s - 75) <= 5);
    // Trace time (wall TSC) does not depend on the sampler: checked once.
    if (sampler == "timer") CHECK(std::fabs(hot_t - 75) <= 5);
    CHECK(total(samples) > 200);
    // Recorded samples (weighted) per ms of CPU: the asked rate. Sample
    // events (stack walks) may be fewer: periods that pass while the thread is
    // descheduled (ctest -j2 on 2 cores) reach it as one signal, whose weight
    // carries them, so events are checked only for gross loss.
    // (Regression: CI saw 0.796 events per ms with the weighted rate in range.)
    const double weight = std::stod(lua.global("WEIGHT"));
    const double delivered = std::stod(lua.global("DELIVERED"));
    CAPTURE(weight);
    CAPTURE(delivered);
    CHECK(weight >= 0.8);
    CHECK(weight <= 1.2);
    CHECK(delivered >= 0.5);
    CHECK(delivered <= weight);
  }
}

// Regression: in both mode a third of the samples of a call-heavy program fell in luaflame's
// own call/return hook and went to the callee (call event) or the caller (return event), while
// the trace leaves its hook time out: sampled and traced shares of the same run differed by
// 5 points on dkjson + lpeg. They now go to "[luaflame] hook" under the frame it ran for.
TEST_CASE("sample: a signal in luaflame's own hook goes to [luaflame] hook, not to the program") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function tiny(x) return x + 1 end
    function calls()
      local t0, x = os.clock(), 0
      while os.clock() - t0 < 0.4 do for i = 1, 1000 do x = tiny(x) end end
    end
    -- The profile compared with the count is the one stop() writes: a sample
    -- between luaflame.folded() and stop() (in folded's return hook or stop's
    -- call hook, seen once under qemu: 131 in the text, 132 counted) is in both.
    lf.start{mode = 'both', hz = 999, output = 'hook_leaf_test.folded'}
    calls()
    local s = lf.stop()
    IN_HOOKS, TOTAL = s.samples_in_hooks, s.samples
    -- A program hook forwarded by luaflame's: a sample in it is the program's.
    local n = 0
    lf.start{mode = 'both', hz = 999}
    debug.sethook(function() n = n + 1 end, 'c')
    calls()
    debug.sethook()
    PROGRAM_HOOK_IN_HOOKS = lf.stop().samples_in_hooks
  )");
  const std::string text = read_file("hook_leaf_test.folded");
  for (const char* f :
       {"hook_leaf_test.folded", "hook_leaf_test.time.folded", "hook_leaf_test.calls.folded"})
    std::remove(f);
  REQUIRE(err == "");
  const Folded samples = parse_folded(text);
  CAPTURE(text);
  const double in_hooks = std::stod(lua.global("IN_HOOKS"));
  CAPTURE(in_hooks);
  CAPTURE(lua.global("TOTAL"));
  // Two hooks per call of `tiny`: a good part of the run is luaflame's.
  CHECK(in_hooks >= 0.05 * total(samples));
  double leaf_hook = 0, under_calls = 0;
  for (const auto& kv : samples) {
    const std::string& stack = kv.first;  // not a structured binding: CAPTURE's lambda
    const auto at = stack.find(";[luaflame] hook");
    if (at == std::string::npos) continue;
    CAPTURE(stack);
    CHECK(at + std::strlen(";[luaflame] hook") == stack.size());  // a leaf
    leaf_hook += kv.second;
    // Under the frame the hook ran for: `calls` and `tiny`, but also the call
    // hook of luaflame.stop.
    if (stack.find(";calls ") != std::string::npos) under_calls += kv.second;
  }
  CHECK(leaf_hook == in_hooks);
  CHECK(under_calls >= 0.9 * leaf_hook);
  CHECK(lua.global("PROGRAM_HOOK_IN_HOOKS") == "0");
}

namespace {

// The program run under `mode` (plus `extra` start options); its folded
// profile of the mode's first metric.
Folded profile_of(const std::string& body, const std::string& mode, const std::string& extra = "") {
  Lua lua;
  std::string err =
      lua.run("local lf = require 'luaflame'\n" + body + "\nlf.start{mode = '" + mode +
              "', hz = 999" + extra + "}\nmain()\nF = lf.folded()\nlf.stop()\n");
  REQUIRE(err == "");
  return parse_folded(lua.global("F"));
}

// 200 arithmetic lines then a math.abs call, in a loop: the loop body.
std::string abs_loop() {
  std::string body = "function main()\n  local x = 0.5\n  for i = 1, 60000 do\n";
  for (int i = 0; i < 200; ++i) body += "    x = x * 1.0000001 + 0.0000001\n";
  return body + "    x = math.abs(x)\n  end\n  return x\nend\n";
}

// A program with a known answer: at least `min_self` percent of its samples
// have `leaf` as the leaf frame.
struct LeafCase {
  const char* name;
  std::string code;
  const char* leaf;
  double min_self;  ///< percent of samples with `leaf` as the leaf frame
};

// A long string.rep: its self time is its own, not the next call's.
const char* const kLongRep =
    "function main() local n = 0 for i = 1, 40 do n = n + #string.rep('abc', 3000000) end end";

// The program's own samples: those luaflame's hook took ("[luaflame] hook"
// leaves) left out. Regression: under ASan (slow instrumented hooks) they were
// 14% of a both run and took the 200-lines loop below 90%.
Folded program_only(const Folded& f) {
  Folded out;
  const std::string hook = ";[luaflame] hook";
  for (const auto& kv : f)
    if (kv.first.size() < hook.size() ||
        kv.first.compare(kv.first.size() - hook.size(), hook.size(), hook) != 0)
      out.insert(kv);
  return out;
}

// Profiles each case in `mode` and checks its leaf share of the program's samples.
void check_leaf_shares(const std::vector<LeafCase>& cases, const char* mode) {
  for (const LeafCase& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    Folded f = program_only(profile_of(c.code, mode));
    CAPTURE(f.size());
    CHECK(total(f) > 50);
    CHECK(share_leaf(f, c.leaf) >= c.min_self);
  }
}

}  // namespace

// Regression (issue 10): the hook armed by the signal runs at the next
// call or return, and used to charge the stack of that moment: 341 of 342
// samples went to [C] math.abs. The signal now records the running
// CallInfo and the hook walks from there.
TEST_CASE("sample: charged where the timer fired, not at the next call or return") {
  check_leaf_shares(
      {
          {"200 arithmetic lines then math.abs", abs_loop(), "main ", 95},
          {"a long string.rep", kLongRep, "[C] string.rep", 90},
          {"a tight loop with no call",
           "function main() local x = 0 for i = 1, 3e7 do x = x + i % 7 end end", "main ", 95},
      },
      "sample");
}

// Sampled self shares against traced ones, run apart (tracing slows calls).
TEST_CASE("sample: self shares within 5 points of trace mode (calls; C calling back into Lua)") {
  struct Case {
    const char* name;
    const char* code;
    std::vector<const char*> leaves;
  };
  const Case cases[] = {
      {"a tight loop with calls",
       "function f(x) for j = 1, 40 do x = x * 1.0000001 + 0.5 end return x end\n"
       "function main() local x = 0 for i = 1, 6e5 do x = f(x) for j = 1, 120 do x = x * 0.9999 + "
       "j end end end",
       {"main ", "f "}},
      {"lpeg.match calling a Lua callback",
       "local lpeg = require 'lpeg'\n"
       "function cb(s) local x = 0 for i = 1, 40 do x = x + i end return #s + x end\n"
       "local p = lpeg.Ct(((lpeg.C(lpeg.R('az') ^ 1) / cb) + 1) ^ 0)\n"
       "local text = string.rep('hello world abc defgh ', 20000)\n"
       "function main() for i = 1, 30 do lpeg.match(p, text) end end",
       {"[C] lpeg.match", "cb "}},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    // Trace time is the TSC's wall time: on a loaded machine a descheduled
    // thread charges its wait to the frame on top. Up to three pairs, the
    // first where every leaf agrees counts (the sampled CPU clock is steady).
    double worst = 100;
    std::string last;
    for (int attempt = 0; attempt < 3 && worst > 5; ++attempt) {
      Folded sampled = profile_of(c.code, "sample"), traced = profile_of(c.code, "trace");
      CHECK(total(sampled) > 100);
      worst = 0;
      last.clear();
      for (const std::string leaf : c.leaves) {
        const double s = share_leaf(sampled, leaf), t = share_leaf(traced, leaf);
        CHECK(t > 10);
        worst = std::max(worst, std::fabs(s - t));
        last += leaf + ": sampled " + std::to_string(s) + " traced " + std::to_string(t) + "\n";
      }
    }
    CAPTURE(last);
    CHECK(worst <= 5);
  }
}

// The direct reads of Lua's structures (collector/luaint.hpp) are all on
// for the Lua CI builds with: a Lua update that changes a layout turns one
// off (slower or less exact, said in the summary) and fails here.
TEST_CASE("luaint: every fast path is on for this Lua") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    lf.start{mode = 'both'}
    local s = lf.stop()
    ON, OFF = s.fast_paths, s.fast_paths_off or ''
  )");
  REQUIRE(err == "");
  CAPTURE(lua.global("OFF"));
  CHECK(lua.global("ON") == "ci_walk signal_position hook_count lua_ident c_ident allowhook");
  CHECK(lua.global("OFF") == "");
}

TEST_CASE("sample: time inside a C function is charged to it") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function build() local n = 0 for i = 1, 40 do n = n + #string.rep('abc', 3000000) end return n end
    lf.start{hz = 999}
    build()
    SAMPLES = lf.folded()
    lf.stop()
  )");
  REQUIRE(err == "");
  Folded f = parse_folded(lua.global("SAMPLES"));
  CAPTURE(lua.global("SAMPLES"));
  CHECK(share_containing(f, "[C] string.rep") > 80);
}

TEST_CASE("trace: time a coroutine spends suspended is not charged to it") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
    local function producer() for i = 1, 20 do coroutine.yield(i) end end
    local function consumer()
      local co = coroutine.wrap(producer)
      for i = 1, 20 do co() spin(200000) end
    end
    lf.start{mode = 'trace'}
    consumer()
    TIME = lf.folded('time')
    lf.stop()
  )");
  REQUIRE(err == "");
  Folded f = parse_folded(lua.global("TIME"));
  CAPTURE(lua.global("TIME"));
  CHECK(share_containing(f, "producer ") < 5);
  CHECK(share_containing(f, "spin ") > 85);
}

TEST_CASE("hooks: a hook set before start keeps running and is restored at stop") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local calls = 0
    local function counter() calls = calls + 1 end
    debug.sethook(counter, 'c')
    local function f() return 1 end
    for mode in ('sample trace'):gmatch('%S+') do
      calls = 0
      lf.start{mode = mode}
      for i = 1, 1000 do f() end
      lf.stop()
      assert(calls >= 1000, mode .. ': chained hook saw ' .. calls .. ' calls')
      local h, m = debug.gethook()
      assert(h == counter and m == 'c', mode .. ': hook not restored')
    end
    debug.sethook()
  )");
  CHECK(err == "");
}

TEST_CASE("module: bad use raises clear Lua errors") {
  struct Case {
    const char* code;
    const char* message;
  };
  const Case cases[] = {
      {"lf.start{hz = 'x'}", "option 'hz' must be a number, got string"},
      {"lf.start{bogus = 1}", "unknown option 'bogus'"},
      {"lf.start{mode = 'fast'}", "option 'mode': expected sample"},
      {"lf.start(42)", "options must be a table"},
      {"lf.stop()", "luaflame is not running"},
      {"lf.start() lf.start()", "already running"},
      {"lf.start() lf.folded('alloc_bytes')", "metric 'alloc_bytes' is not recorded"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.code);
    Lua lua;
    std::string err = lua.run(std::string("local lf = require 'luaflame'\n") + c.code);
    CHECK(err.find(c.message) != std::string::npos);
    if (lfc::running()) lfc::stop(lua.L);
  }
}

TEST_CASE("module: profile(fn, opts, ...) returns the summary then fn's results") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local s, a, b = lf.profile(function(x, y) return x + y, 'ok' end, {mode = 'trace'}, 2, 3)
    assert(a == 5 and b == 'ok')
    assert(s.calls >= 1 and s.mode == 'trace')
    assert(not lf.running())
    local ok, e = pcall(lf.profile, function() error('inner') end)
    assert(not ok and e:find('inner') and not lf.running())
  )");
  CHECK(err == "");
}

TEST_CASE("lines: leaf frames carry the current line") {
  Lua lua;
  std::string err = lua.run(
      "local lf = require 'luaflame'\n"
      "local function spin(n)\n"
      "  local x = 0\n"
      "  for i = 1, n do x = x + i % 7 end\n"
      "  return x\n"
      "end\n"
      "lf.start{lines = true}\n"
      "spin(20000000)\n"
      "SAMPLES = lf.folded()\n"
      "lf.stop()\n",
      "@lines.lua");
  REQUIRE(err == "");
  Folded f = parse_folded(lua.global("SAMPLES"));
  CAPTURE(lua.global("SAMPLES"));
  CHECK(share_leaf(f, "spin lines.lua:4") > 80);
}

TEST_CASE("trace: recursion 200 deep gives 200 nested paths, each called once") {
  Lua lua;
  std::string err = lua.run(
      "local lf = require 'luaflame'\n"
      "local function rec(n)\n"
      "  if n == 0 then error('bottom') end\n"
      "  local r = rec(n - 1)\n"
      "  return r + 1\n"
      "end\n"
      "local function after() return 1 end\n"
      "lf.start{mode = 'both'}\n"
      "assert(not pcall(rec, 199))\n"
      "after()\n"
      "CALLS = lf.folded('calls')\n"
      "lf.stop()\n",
      "@rec.lua");
  REQUIRE(err == "");
  Folded f = parse_folded(lua.global("CALLS"));
  int rec_paths = 0;
  std::size_t deepest = 0;
  for (const auto& kv : f) {
    std::size_t depth = 0, pos = 0;
    while ((pos = kv.first.find(" rec.lua:2", pos)) != std::string::npos) ++depth, ++pos;
    const std::string leaf = " rec.lua:2";
    if (kv.first.size() > leaf.size() &&
        kv.first.compare(kv.first.size() - leaf.size(), leaf.size(), leaf) == 0) {
      ++rec_paths;
      CHECK(kv.second == 1);
    }
    deepest = std::max(deepest, depth);
  }
  CHECK(rec_paths == 200);
  CHECK(deepest == 200);
  // After the error unwound 200 frames, after() is a child of the main chunk.
  CHECK(f["rec.lua rec.lua:0;after rec.lua:7"] == 1);
}

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

// Regression (issue 10): the program's own hooks lost events (a line hook
// 53 of 4,000,003 lines, a count hook every 100,000 instructions fired
// 804-818 times of 1,000), and an instruction-limit sandbox hung under
// sample/both (and trace on a coroutine): arming reset the thread's count.
TEST_CASE(
    "hooks: the program's line, count and call/return hooks and a sandbox keep their semantics in "
    "every mode") {
  for (std::string mode : {"sample", "trace", "both", "sample+alloc"}) {
    CAPTURE(mode);
    Lua lua;
    std::string err = lua.run("MODE = '" + mode + "'\n" + R"LUA(local lf = require 'luaflame'
local function loop(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function lines()
  local n = 0
  debug.sethook(function() n = n + 1 end, 'l')
  loop(300000)
  debug.sethook()
  return n
end
local function counts()
  local n = 0
  debug.sethook(function() n = n + 1 end, '', 1000)
  loop(300000)
  debug.sethook()
  return n
end
local function callret()
  local c, r = 0, 0
  debug.sethook(function(e) if e == 'return' then r = r + 1 else c = c + 1 end end, 'cr')
  for i = 1, 30000 do math.abs(i) loop(3) end
  debug.sethook()
  return c, r
end
local function sandbox()
  debug.sethook(function() error('limit', 0) end, '', 1e7)
  for i = 1, 2e9 do end
end
local want = {lines(), counts(), callret()}
lf.start{mode = MODE, hz = 999}
local got = {lines(), counts(), callret()}
local ok, e = pcall(sandbox)
debug.sethook()
local co = coroutine.create(sandbox)
local cok, ce = coroutine.resume(co)
local s = lf.stop()
RESULT = string.format('lines %d/%d count %d/%d call %d/%d return %d/%d sandbox %s %s coroutine %s %s',
  got[1], want[1], got[2], want[2], got[3], want[3], got[4], want[4], ok, e, cok, ce)
assert(got[1] == want[1] and got[2] == want[2] and got[3] == want[3] and got[4] == want[4], RESULT)
assert(not ok and e == 'limit' and not cok and ce == 'limit', RESULT)
if MODE ~= 'trace' then assert(s.sample_events > 50, RESULT .. ': ' .. s.sample_events .. ' sample events') end
)LUA");
    CHECK(err == "");
  }
}

// Regression (issue 10, seen in the arm64 CI job): a signal falling while
// the program's count hook ran (or while luaG_traceexec was raising its
// event) gave back a count progress short of the hook's own instructions:
// 902 of 903 events at a count of 1,000 under qemu, and natively with a
// count of 3 about one event lost per four samples.
TEST_CASE("hooks: a count hook of a few instructions gets every event while samples land in it") {
  for (std::string mode : {"sample", "both", "sample+alloc"}) {
    CAPTURE(mode);
    Lua lua;
    std::string err = lua.run("MODE = '" + mode + "'\n" + R"LUA(local lf = require 'luaflame'
local function loop(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function counts(k)
  local c = 0
  debug.sethook(function() c = c + 1 end, '', k)
  loop(200000)
  debug.sethook()
  return c
end
local want3, want1000 = counts(3), counts(1000)
lf.start{mode = MODE, hz = 999}
local bad = {}
for round = 1, 6 do
  local got3, got1000 = counts(3), counts(1000)
  if got3 ~= want3 or got1000 ~= want1000 then
    bad[#bad + 1] = string.format('round %d: %d/%d %d/%d', round, got3, want3, got1000, want1000)
  end
end
local s = lf.stop()
RESULT = table.concat(bad, ', ')
assert(#bad == 0, RESULT)
assert(s.sample_events > 50, s.sample_events .. ' sample events')
)LUA");
    CHECK(err == "");
  }
}

// A coverage hook (as luacov's: a line hook counting hits per line) gets
// exact counts whichever of it and luaflame starts first.
TEST_CASE("hooks: a coverage hook counts every line exactly, started before or after luaflame") {
  for (std::string mode : {"sample", "trace", "both"}) {
    for (std::string order : {"coverage first", "luaflame first"}) {
      CAPTURE(mode);
      CAPTURE(order);
      Lua lua;
      std::string err = lua.run("MODE, ORDER = '" + mode + "', '" + order + "'\n" + R"(
        local lf = require 'luaflame'
        local function work()
          local t = {}
          for i = 1, 200000 do
            if i % 3 == 0 then t[#t + 1] = i
            elseif i % 5 == 0 then t[#t + 1] = -i end
          end
          for _, v in ipairs(t) do if v < 0 then t[1] = v end end
          return #t
        end
        local function covered(profile)
          local hits = {}
          local function hook(_, line) hits[line] = (hits[line] or 0) + 1 end
          if profile and ORDER == 'luaflame first' then lf.start{mode = MODE, hz = 999} end
          debug.sethook(hook, 'l')
          if profile and ORDER == 'coverage first' then lf.start{mode = MODE, hz = 999} end
          work()
          if profile then lf.stop() end
          debug.sethook()
          return hits
        end
        local want, got = covered(false), covered(true)
        for line, n in pairs(want) do
          assert(got[line] == n, 'line ' .. line .. ': ' .. tostring(got[line]) .. ' hits, want ' .. n)
        end
        for line, n in pairs(got) do assert(want[line], 'line ' .. line .. ' was not run') end
      )");
      CHECK(err == "");
    }
  }
}

// Regression (issue 10): a function's frame text depended on the call that
// was seen first (dkjson's encode2 was <anon> in two runs of four: its
// first call is a tail call, which has no name). Names now come from the
// definition's text, so whichever call comes first gives the same frame.
TEST_CASE("frames: the same function has the same frame text whatever call is seen first") {
  const std::string path = "frames_stable_test.lua";
  {
    std::ofstream out(path);
    out << "local step\n"
           "local function via_tail(n) return step(n) end\n"
           "step = function(n) local x = 0 for i = 1, n do x = x + i end return x end\n"
           "local M = {}\n"
           "function M.run(first_tail) if first_tail then via_tail(10) end step(10) via_tail(10)\n"
           "  return pcall(step, 10) end\n"
           "return M\n";
  }
  std::vector<std::string> texts;
  for (const char* first_tail : {"true", "false"}) {
    CAPTURE(first_tail);
    Lua lua;
    std::string err = lua.run(std::string(R"(
      local lf = require 'luaflame'
      local M = dofile('frames_stable_test.lua')
      local json = require 'dkjson'
      lf.start{mode = 'trace'}
      M.run()" + std::string(first_tail) + R"()
      json.encode({a = {1, 2, {b = 'c'}}, d = {e = {f = true}}})
      CALLS = lf.folded('calls')
      lf.stop()
    )"));
    REQUIRE(err == "");
    std::string calls = lua.global("CALLS");
    CAPTURE(calls);
    CHECK(calls.find(";step frames_stable_test.lua:3 ") != std::string::npos);
    CHECK(calls.find("<anon> frames_stable_test.lua") == std::string::npos);
    CHECK(calls.find("encode2 /usr/share/lua/5.4/dkjson.lua:259") != std::string::npos);
    Folded f = parse_folded(calls);
    std::string frames;
    for (const auto& kv : f) frames += kv.first.substr(kv.first.rfind(';') + 1) + "\n";
    texts.push_back(frames);
  }
  std::remove(path.c_str());
  CHECK(texts[0] == texts[1]);
}

TEST_CASE("frames: C iterators named after what made them, to-be-closed metamethods as such") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local f = io.open('frames_iter_test.txt', 'w') f:write('a\nb\n') f:close()
    local closer = setmetatable({}, {__close = function() end})
    lf.start{mode = 'trace'}
    for _, v in ipairs({1, 2}) do end
    for w in ('a b'):gmatch('%a') do end
    for l in io.lines('frames_iter_test.txt') do end
    for p, c in utf8.codes('ab') do end
    do local x <close> = closer end
    local s = string.rep('x', 100000)
    CALLS = lf.folded('calls')
    lf.stop()
    os.remove('frames_iter_test.txt')
  )",
                            "@frames_iter_test.lua");
  REQUIRE(err == "");
  const std::string calls = lua.global("CALLS");
  CAPTURE(calls);
  for (const char* frame :
       {";[C] ipairs iterator ", ";[C] string.gmatch iterator ", ";[C] io.lines iterator ",
        ";[C] utf8.codes iterator ", ";[C] string.rep;[C] buffer __close "}) {
    CAPTURE(frame);
    CHECK(calls.find(frame) != std::string::npos);
  }
  CHECK(calls.find("for iterator") == std::string::npos);
}

// Regression: ldoc's frames were "[C] table.concat" in one run and "[C] pl.List.concat" in the
// next (penlight aliases it), "[C] load" or "[C] pl.compat.load": the first match in
// package.loaded's hash order, which Lua 5.4 seeds per state.
TEST_CASE("frames: a C function held by several modules has one name in every run") {
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    Lua lua;
    std::string err = lua.run(R"(
      local lf = require 'luaflame'
      for i = 1, 40 do
        package.loaded['m' .. i] = {concat = table.concat, push = table.insert, ld = load}
        package.loaded['x' .. i] = {running = lf.running}
      end
      lf.start{mode = 'trace'}
      for i = 1, 3 do
        local t = {}
        table.insert(t, 'a')
        local s = table.concat(t)
        load('return 1')
        lf.running()
      end
      CALLS = lf.folded('calls')
      lf.stop()
    )",
                              "@frames_alias_test.lua");
    REQUIRE(err == "");
    const std::string calls = lua.global("CALLS");
    CAPTURE(calls);
    for (const std::string frame :
         {";[C] table.concat ", ";[C] table.insert ", ";[C] load ", ";[C] x1.running "}) {
      CAPTURE(frame);
      CHECK(calls.find(frame) != std::string::npos);
    }
    CHECK(calls.find(";[C] m") == std::string::npos);
  }
}

TEST_CASE("alloc: blocks from before the session are freed safely; the allocator is restored") {
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

TEST_CASE("hooks: a hook the program sets while profiling keeps working and stays after stop") {
  Lua lua;
  std::string err = lua.run(R"(
    local lf = require 'luaflame'
    local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
    local function f() return 1 end
    for mode in ('sample trace'):gmatch('%S+') do
      local calls = 0
      local function counter() calls = calls + 1 end
      lf.start{mode = mode}
      debug.sethook(counter, 'c')
      for i = 1, 500 do f() end
      spin(10000000)
      local s = lf.stop()
      assert(calls >= 500, mode .. ': the program hook saw ' .. calls .. ' calls')
      assert(debug.gethook() == counter, mode .. ': the program hook was removed at stop')
      if mode == 'sample' then assert(s.sample_events > 20, 'sampling stopped: ' .. s.sample_events) end
      debug.sethook()
    end
  )");
  CHECK(err == "");
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

// Both mode takes a sample's node from the tracer's shadow stack
// (Session::traced_node) instead of walking the stack: the same known
// answers as sample mode, with coroutines and a tail call on the way.
TEST_CASE("both: a sample is charged where the timer fired, from the tracer's stack") {
  check_leaf_shares(
      {
          // 90, not 95: a signal in Lua's own hook dispatch around each
          // math.abs call and return (outside luaflame's hook) is math.abs's.
          {"200 arithmetic lines then math.abs", abs_loop(), "main ", 90},
          {"a long string.rep", kLongRep, "[C] string.rep", 90},
          {"a loop in a coroutine reached by a tail call",
           "function spin() local x = 0 for i = 1, 3e7 do x = x + i % 7 end return x end\n"
           "function via() return spin() end\n"
           "function main() local co = coroutine.wrap(function() return via() end) co() end",
           "spin ", 95},
      },
      "both");
}

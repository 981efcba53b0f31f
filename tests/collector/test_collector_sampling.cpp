// The collector's sampled and timed answers, in-process: shares of samples
// (75/25, where the timer fired, C functions, the line), time a suspended
// coroutine is not charged, samples in luaflame's own hook. They measure CPU
// and wall clocks, so each case runs alone (RUN_SERIAL), never beside a load.
// The rest of the collector's unit tests are in test_collector.cpp.
#include "collector_test_util.hpp"

using namespace lfct;

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
    lf.start{mode = 'both', hz = 999, output = 'hook_leaf_test.folded', show_profiler = true}
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
TEST_CASE("sample: self shares within 5 points of trace mode (calls, C calling back into Lua)") {
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
    // thread charges its wait to the frame on top. Up to five pairs, the
    // first where every leaf agrees counts (the sampled CPU clock is steady).
    // Three were not enough in CI beside the idle-priority jobs (tidy, the
    // arm64 emulation): lpeg.match read 48.5 sampled, 40.7 traced on the
    // third, while it passed 3 of 3 runs alone and in the CI run before.
    double worst = 100;
    std::string last;
    for (int attempt = 0; attempt < 5 && worst > 5; ++attempt) {
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

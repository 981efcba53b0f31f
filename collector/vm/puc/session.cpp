// The session's life and wiring: start, stop, the summary, and the events
// that cross the parts (a coroutine switch). The parts live in their own
// files (session.hpp lists them).
#include "vm/puc/session.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <vector>

#include "core/streamer.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/closer.hpp"
#include "vm/puc/alloc.hpp"
#include "vm/puc/sessions.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

uint64_t Session::clock_ns_read() const {
  timespec ts;
  if (clock_gettime(opt.cpu_clock ? lua_cpu_clock : CLOCK_MONOTONIC, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t Session::clock_ns_last() const {
  const uint64_t now = clock_ns_read();
  return now || !opt.cpu_clock ? now : sampler.last_clock();
}

std::size_t Session::memory_bytes() const {
  std::size_t b = sizeof(Session) + tree.memory_bytes() + frames.memory_bytes();
  b += tracer.memory_bytes();
  b += walker.memory_bytes() + coroutines.memory_bytes();
  return b;
}

// The coroutine switch, in one critical section: the tracking (chain,
// running thread, a pending sample moved), the new thread's hook, and the
// tracer's shadow stack hung under the resumer's frame.
void Session::on_resume(lua_State* L, lua_State* co) {
  hooks.begin_critical();
  coroutines.enter(co, hooks);
  install_thread_hook(L, co);
  if (opt.trace) tracer.resumed(L, co);
  hooks.end_critical();
}

void Session::on_return(lua_State* L, lua_State* co) {
  hooks.begin_critical();
  coroutines.leave(L, co, hooks);
  if (opt.trace) tracer.returned(L, co);
  hooks.end_critical();
}

// The state moved to the calling thread (session.hpp): what its old
// thread's CPU clock counted is kept, the new thread's counts on.
void Session::follow_thread() noexcept {
  if (opt.cpu_clock) {
    const uint64_t was = clock_ns_last();
    if (was > acct.start_clock) clock_before_ns += was - acct.start_clock;
    clockid_t here{};
    if (pthread_getcpuclockid(pthread_self(), &here) == 0) lua_cpu_clock = here;
    acct.start_clock = clock_ns_read();
  }
  coroutines.move_here();
  tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (opt.sample) sampler.follow(lua_cpu_clock);
}

namespace {

// stop() from the lua_close finalizer: no collection there. Initial-exec, a
// byte of the static TLS glibc keeps for modules loaded later: this module is
// dlopen'ed by require and dlclose'd by lua_close, and with the default
// (dynamic) model the byte came from __tls_get_addr, which allocates on a
// thread's first access, and LeakSanitizer kept that block's range after the
// dlclose and died reading it at exit ("Tracer caught signal 11", "DTLS 4 at
// 0x13e-0x100001240"): 15 of 50 runs of the module test under lua5.3, 0 of 50
// with this model.
thread_local bool t_closing __attribute__((tls_model("initial-exec"))) = false;

void report(const Summary& sum) {
  if (g_report_at_exit || !sum.fallback_file.empty() || !sum.stream_error.empty())
    std::fprintf(stderr, "%s", format_summary(sum).c_str());
}

// lua_close runs this finalizer: the session ends with the state.
int on_state_close(lua_State* L) noexcept {
  Session* s = sessions::of(L);
  if (s && s->closes_with(L)) {
    t_closing = true;
    const char* failed = cxx_guard([&] { report(s->stop(L)); });
    t_closing = false;
    if (failed) std::fprintf(stderr, "luaflame: ending the profile at lua_close: %s\n", failed);
  }
  return 0;
}

// At exit: the sessions of this thread, and of threads that have ended,
// stop as usual; those of threads still running (a host that exits without
// joining them) are finished from outside: their files written, their
// streams finished, the sessions left to the threads (never deleted).
void at_process_exit() {
  std::vector<Session*> here;
  finish_outside_all([&](const std::function<void(Profile&)>& outside) {
    sessions::each([&](Session* s) {
      if (s->stoppable_here())
        here.push_back(s);
      else
        outside(s->run());
    });
  });
  for (Session* s : here) report(s->stop(nullptr));
}

// Sessions left behind (Session::leave_behind): still reachable (no leak report).
Session* g_left_behind[sessions::kMax] = {};

// fork (pthread_atfork's child handler: one thread, before the child runs
// anything else). The child inherits neither the sampler's timers nor its
// thread nor the streamer's, so every session is left behind there (the
// child reports nothing of the parent's profiles, and never joins a thread
// it does not have). The allocator passes through, and a hook of ours the
// child meets gives back the program's. No lock: the only thread.
void detach_in_child() {
  sessions::each([](Session* s) { s->leave_behind(true); });
}

}  // namespace

bool Session::stoppable_here() const {
  return coroutines.on_lua_thread() ||
         (syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH);
}

bool Session::closes_with(lua_State* L) const {
  return main_L == L && closer_id == closer::serial_of(L);
}

// In a forked child the hook given back is the one the program has on the
// main thread now (a host sets its own after attach started the run); no
// signal of ours comes there (timers are not inherited), so it is read
// outside a critical section. Abandoned, the one of before start.
void Session::leave_behind(bool in_child) {
  if (slot >= 0) g_left_behind[slot] = this;
  if (alloc) alloc->active = false;
  const HookChain::Chained before = in_child ? hooks.program_hook(main_L) : hooks.start_hook();
  set_hook_after_stop(sessions::key_of(main_L), before.hook, before.mask, before.count, in_child);
  sessions::remove(slot, !in_child);
}

void Session::abandon(const char* why, const char* where) noexcept {
  std::fprintf(stderr, "luaflame: %s in %s: profiling stopped, the program runs on\n", why, where);
  if (opt.sample) sampler.stop();
  std::lock_guard<std::mutex> lock(ending_mutex());
  leave_behind(false);
}

void abandon_session(Session* s, const char* why, const char* where) noexcept {
  s->abandon(why, where);
}

bool running(lua_State* L) {
  return L && sessions::of(L) != nullptr;
}

bool finish_for_exit() {
  return finish_outside_all([](const std::function<void(Profile&)>& outside) {
    sessions::each([&](Session* s) { outside(s->run()); });
  });
}

// start's Lua calls that may raise (a memory error, making tables and
// strings), each run under lua_pcall: no Lua error jumps over start's C++
// objects (the session, the message). Argument 1: the session.
// What the frame table's C++ throws (it allocates) is raised as a Lua
// error once out of the guard: start fails with that message.
int Session::start_frames_body(lua_State* L) noexcept {
  Session* s = static_cast<Session*>(lua_touserdata(L, 1));
  const char* failed = cxx_guard([&] {
    s->frames.preset_makers(L);
    s->frames.preset_stdlib(L);
  });
  return failed ? luaL_error(L, "%s", failed) : 0;
}

int Session::start_install_body(lua_State* L) noexcept {
  Session* s = static_cast<Session*>(lua_touserdata(L, 1));
  install_coroutine_wrappers(L);
  install_hook_wrappers(L);
  s->closer_id = closer::add(L, on_state_close);
  return 0;
}

bool Session::start_step(lua_State* L, lua_CFunction body) {
  lua_pushcfunction(L, body);
  lua_pushlightuserdata(L, this);
  const int st = lua_pcall(L, 1, 0, 0);
  if (st != LUA_OK) lua_pop(L, 1);
  return st == LUA_OK;
}

// The session in the table of live sessions (sessions.hpp): from here the
// hooks, the wrappers and the handler find it. The first session decides
// whether states are told apart (l_G verified by the probe); when they are
// not, one state is profiled at a time.
bool Session::publish(lua_State* L, std::string& err) {
  std::lock_guard<std::mutex> lock(ending_mutex());
  bool live = false;
  sessions::each([&](Session*) { live = true; });
  if (!live)
    sessions::g_table.key_or.store(layout.global_ok ? 0 : ~std::uintptr_t{0},
                                   std::memory_order_relaxed);
  if (sessions::of(L))
    return err = "luaflame is already running (call luaflame.stop() first)", false;
  if (live && !(sessions::g_table.key_or.load(std::memory_order_relaxed) == 0 && layout.global_ok))
    return err =
               "luaflame is already running on another Lua state of this process (lua_State.l_G "
               "not verified on this Lua: its states cannot be told apart)",
           false;
  slot = sessions::add(this, sessions::key_of(L));
  if (slot < 0)
    return err = "too many Lua states profiled at once (" + std::to_string(sessions::kMax) + ")",
           false;
  return true;
}

// Trace mode keys its shadow frames by CallInfo (tracer.cpp): on 5.2+ it
// walks CallInfo.previous; on 5.1 (an array) it reads the caller's opcode
// to tell a tail call. Either read unverified: refused, with the reason.
bool Session::trace_refused(std::string& err) const {
  if (LUA_VERSION_NUM == 501 && !layout.tail51_ok)
    err =
        "trace mode needs Lua 5.1's CallInfo array (to tell tail calls from calls), not "
        "verified on this Lua";
  else if (LUA_VERSION_NUM > 501 && !ci_walk_ok)
    err = "trace mode needs CallInfo.previous, not verified on this Lua (" + layout.why + ")";
  else
    return false;
  return true;
}

// Before the session is published: the probe's verdicts, the frames, the
// hooks and clocks of the start thread.
bool Session::configure(lua_State* L, std::string& err) {
  layout = luaint::probe(L);
  if (layout.mem_error) return err = "not enough memory", false;
  ci_walk_ok = layout.ci_prev_ok;
  if (!layout.lua_ident_ok) tracer.ident_lua = -1;  // the call cache names Lua calls by lua_getinfo
  if (!layout.c_ident_ok) tracer.ident_c = -1;
  // Two functions defined on one line are two frames (frames.hpp).
  if (layout.proto_ok) frames.proto_of = luaint::proto_of;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  main_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  preset_coroutine_frames(frames);
  if (!start_step(L, start_frames_body)) return err = "not enough memory", false;
  if (opt.sample) sampling.hook_frame = frames.named("[luaflame] hook");
  sampling.show_profiler = opt.show_profiler;
  hooks.keep_start_hook(L);
  coroutines.start(L);
  acct.start_wall = now_ns();
  acct.start_unix = unix_now_ns();
  if (pthread_getcpuclockid(pthread_self(), &lua_cpu_clock) != 0) opt.cpu_clock = false;
  acct.start_clock = clock_ns_read();
  tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (opt.trace) {
    if (trace_refused(err)) return false;
    tracer.start(L, !hooks.start_hook().hook);  // a hook to forward: the slow path
  }
  return true;
}

// After it is published (the table owns it): the allocator, the wrappers,
// the hooks, the sampler, the stream. A failure stops (deletes) it.
bool Session::begin(lua_State* L, std::string& err) {
  if (opt.alloc && !start_alloc(err)) return stop(L), false;
  if (!start_step(L, start_install_body)) return stop(L), err = "not enough memory", false;
  // The trace hook last: the protected call above is not the program's.
  if (opt.trace) {
    lua_sethook(L, lf_hook, hooks.base_mask(), hooks.start_hook().count);
    if (main_L && main_L != L && lua_gethook(main_L) != lf_hook)
      lua_sethook(main_L, lf_hook, hooks.base_mask(), hooks.start_hook().count);
  }
  if (opt.sample && !sampler.start(opt.hz, opt.cpu_clock, lua_cpu_clock, slot, err))
    return stop(L), false;
  start_streaming();
  return true;
}

bool Session::start(lua_State* L, const Options& o, std::string& err) {
  if (sessions::of(L))
    return err = "luaflame is already running (call luaflame.stop() first)", false;
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    std::atexit(at_process_exit);
    pthread_atfork(nullptr, nullptr, detach_in_child);
  });
  Streamer::set_exit_handler(at_process_exit);  // registered again after httplib's first answer
  auto s = std::make_unique<Session>(L, o);
  if (!s->configure(L, err) || !s->publish(L, err)) return false;  // s deletes it
  return s.release()->begin(L, err);  // the table owns it from here: stop() deletes it
}

bool start(lua_State* L, const Options& o, std::string& err) {
  return Session::start(L, o, err);
}

Summary stop(lua_State* L) {
  if (L) {
    Session* s = sessions::of(L);
    return s ? s->stop(L) : Summary{};
  }
  Summary last;
  std::vector<Session*> all;
  {
    std::lock_guard<std::mutex> lock(ending_mutex());
    sessions::each([&](Session* s) { all.push_back(s); });
  }
  for (Session* s : all) last = s->stop(nullptr);
  return last;
}

Summary Session::stop(lua_State* L) {
  Summary sum;
  ending_begin_stop(*this);
  const SamplerKind sampler_kind = sampler.kind();
  if (opt.sample) sampler.stop();
  if (L) {
    hooks.begin_critical();
    hooks.disarm();
    hooks.end_critical_stopped();
    if (opt.trace) tracer.charge_now();
    restore_program_hooks(L);  // session_hooks.cpp
    restore_coroutine_wrappers(L);
    closer::drop(L);
  }
  const HookChain::Chained before = hooks.start_hook();
  set_hook_after_stop(sessions::key_of(main_L), before.hook, before.mask, before.count);
  // Detached before the final collection: finalizers it runs (our closer
  // among them) must not see a session that is going away.
  {
    std::lock_guard<std::mutex> lock(ending_mutex());
    sessions::remove(slot);
  }
  if (opt.alloc) stop_alloc(L, !t_closing);
  fill_summary(sampler_kind, sum);
  output.write(sum);
  // Always said, even with quiet: a profile that was not written (or was cut).
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (sum.files_failed) g_output_failed = true;
  if (streamer) streamer->finish(sum);
  ending_stopped(*this);
  delete this;
  return sum;
}

// The summary of a run that ends (stop): its counts and clocks.
void Session::fill_summary(SamplerKind sampler_kind, Summary& sum) const {
  sum.mode = mode_name(opt);
  sum.lua = vm_release();
  sum.metrics = metrics;
  sum.wall_ns = now_ns() - acct.start_wall;
  const uint64_t clk = clock_ns_last();
  sum.clock_ns = clock_before_ns + (clk > acct.start_clock ? clk - acct.start_clock : 0);
  sum.hz_asked = opt.hz;
  if (opt.sample) {
    sum.samples_asked = static_cast<uint64_t>(static_cast<double>(sum.clock_ns) * opt.hz / 1e9);
    sum.sample_events = acct.sample_events;
    sum.sampler = sampler_kind;
    sum.samples = acct.samples;
    sum.hz_delivered = sum.clock_ns ? static_cast<double>(acct.sample_events) * 1e9 /
                                          static_cast<double>(sum.clock_ns)
                                    : 0;
  }
  // Trace hooks: the mean of the measured slow events (1 in 256, wall
  // ticks) leaving out those the thread was preempted in (one preempted
  // measurement would stand for 255 events: "5419 ms in hooks" for a 3.4 s
  // run), or the least of them when every one was (a short run's first
  // event builds the tree), times the slow events, and the fast path's
  // estimate times its own (Tracer::hook_ticks). The time in hooks cannot
  // exceed the thread's CPU time: that bounds it when the clock is the CPU's.
  if (opt.trace && tracer.hook_mean() > 0)
    sum.hook_ns = acct.hook_ns + tracer.tclock.to_ns(static_cast<uint64_t>(tracer.hook_ticks()));
  else
    sum.hook_ns = acct.hook_ns;
  if (opt.cpu_clock && sum.hook_ns > sum.clock_ns) sum.hook_ns = sum.clock_ns;
  sum.hook_calls = acct.hook_calls + tracer.fast_events();
  sum.fast_paths = layout.on();
  sum.fast_paths_off = layout.why;
  if (opt.sample && sampler.unsampled_threads() > 0) {
    if (!sum.fast_paths_off.empty()) sum.fast_paths_off += "; ";
    sum.fast_paths_off += "not sampled on " + std::to_string(sampler.unsampled_threads()) +
                          " thread(s) the state moved to (" + sampler.unsampled_why() + ")";
  }
  sum.samples_moved = acct.samples_moved;
  sum.samples_in_hooks = acct.samples_in_hooks;
  sum.profiler_shown = opt.show_profiler;
  sum.calls = acct.calls;
  sum.nodes = tree.size();
  sum.frames = names.size();
  sum.memory_bytes = memory_bytes();
  if (col_abytes >= 0) {
    sum.alloc_bytes = alloc_total_bytes;
    sum.alloc_count = alloc_total_count;
    for (uint32_t i = 0; i < tree.size(); ++i) sum.live_bytes += tree.value(i, col_live);
  }
}

void Session::flush() {
  Summary written;
  output.write(written);
  for (const auto& e : written.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (streamer) streamer->flush_now();
}

bool Session::folded(const std::string& metric, std::string& out, std::string& err) {
  const int col = column_of(metric, err);
  if (col < 0) return false;
  if (opt.trace) tracer.charge_now();
  out = output.folded_text(col);
  return true;
}

void flush(lua_State* L) {
  if (Session* s = sessions::of(L)) s->flush();
}

bool folded(lua_State* L, const std::string& metric, std::string& out, std::string& err) {
  Session* s = sessions::of(L);
  if (!s) return err = "luaflame is not running", false;
  return s->folded(metric, out, err);
}

}  // namespace lfc

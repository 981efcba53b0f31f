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

Summary stop_session(Session* s, lua_State* L);
void fill_summary(const Session* s, SamplerKind sampler_kind, Summary& sum);

void report(const Summary& sum) {
  if (g_report_at_exit || !sum.fallback_file.empty() || !sum.stream_error.empty())
    std::fprintf(stderr, "%s", format_summary(sum).c_str());
}

// lua_close runs this finalizer: the session ends with the state.
int on_state_close(lua_State* L) noexcept {
  Session* s = sessions::of(L);
  if (s && s->main_L == L && s->closer_id == closer::serial_of(L)) {
    t_closing = true;
    const char* failed = cxx_guard([&] { report(stop_session(s, L)); });
    t_closing = false;
    if (failed) std::fprintf(stderr, "luaflame: ending the profile at lua_close: %s\n", failed);
  }
  return 0;
}

// The thread that ran s's state is this one or has ended: nothing of the
// state runs beside a stop() from here.
bool stoppable_here(const Session* s) {
  return s->coroutines.on_lua_thread() ||
         (syscall(SYS_tgkill, getpid(), s->tid, 0) != 0 && errno == ESRCH);
}

// At exit: the sessions of this thread, and of threads that have ended,
// stop as usual; those of threads still running (a host that exits without
// joining them) are finished from outside: their files written, their
// streams finished, the sessions left to the threads (never deleted).
void at_process_exit() {
  std::vector<Session*> here;
  finish_outside_all([&](const std::function<void(Profile&)>& outside) {
    sessions::each([&](Session* s) {
      if (stoppable_here(s))
        here.push_back(s);
      else
        outside(*s);
    });
  });
  for (Session* s : here) report(stop_session(s, nullptr));
}

// A session left behind: out of the table (its hooks and handler find
// nothing and give the program its own back), never stopped, written or
// streamed, still reachable (no leak report).
Session* g_left_behind[sessions::kMax] = {};

void leave_behind(Session* s, bool in_child) {
  if (s->slot >= 0) g_left_behind[s->slot] = s;
  if (s->alloc) s->alloc->active = false;
  const HookChain::Chained before = s->hooks.start_hook();
  set_hook_after_stop(sessions::key_of(s->main_L), before.hook, before.mask, before.count,
                      in_child);
  sessions::remove(s->slot, !in_child);
}

// fork (pthread_atfork's child handler: one thread, before the child runs
// anything else). The child inherits neither the sampler's timers nor its
// thread nor the streamer's, so every session is left behind there (the
// child reports nothing of the parent's profiles, and never joins a thread
// it does not have). The allocator passes through, and a hook of ours the
// child meets gives back the program's. No lock: the only thread.
void detach_in_child() {
  sessions::each([](Session* s) { leave_behind(s, true); });
}

}  // namespace

void abandon_session(Session* s, const char* why, const char* where) noexcept {
  std::fprintf(stderr, "luaflame: %s in %s: profiling stopped, the program runs on\n", why, where);
  if (s->opt.sample) s->sampler.stop();
  std::lock_guard<std::mutex> lock(ending_mutex());
  leave_behind(s, false);
}

namespace {

void register_close_finalizer(lua_State* L, Session* s) {
  s->closer_id = closer::add(L, on_state_close);
}

}  // namespace

bool running(lua_State* L) {
  return L && sessions::of(L) != nullptr;
}

bool finish_for_exit() {
  return finish_outside_all([](const std::function<void(Profile&)>& outside) {
    sessions::each([&](Session* s) { outside(*s); });
  });
}

namespace {

// start's Lua calls that may raise (a memory error, making tables and
// strings), each run under lua_pcall: no Lua error jumps over start's C++
// objects (the session, the message). Argument 1: the session.
// What the frame table's C++ throws (it allocates) is raised as a Lua
// error once out of the guard: start fails with that message.
int start_frames_body(lua_State* L) noexcept {
  Session* s = static_cast<Session*>(lua_touserdata(L, 1));
  const char* failed = cxx_guard([&] {
    s->frames.preset_makers(L);
    s->frames.preset_stdlib(L);
  });
  return failed ? luaL_error(L, "%s", failed) : 0;
}

int start_install_body(lua_State* L) noexcept {
  Session* s = static_cast<Session*>(lua_touserdata(L, 1));
  install_coroutine_wrappers(L);
  if (s->opt.trace) install_hook_wrappers(L);
  register_close_finalizer(L, s);
  return 0;
}

bool start_step(lua_State* L, lua_CFunction body, Session* s) {
  lua_pushcfunction(L, body);
  lua_pushlightuserdata(L, s);
  const int st = lua_pcall(L, 1, 0, 0);
  if (st != LUA_OK) lua_pop(L, 1);
  return st == LUA_OK;
}

// The session in the table of live sessions (sessions.hpp): from here the
// hooks, the wrappers and the handler find it. The first session decides
// whether states are told apart (l_G verified by the probe); when they are
// not, one state is profiled at a time.
bool publish(Session* s, lua_State* L, std::string& err) {
  std::lock_guard<std::mutex> lock(ending_mutex());
  bool live = false;
  sessions::each([&](Session*) { live = true; });
  if (!live)
    sessions::g_table.key_or.store(s->layout.global_ok ? 0 : ~std::uintptr_t{0},
                                   std::memory_order_relaxed);
  if (sessions::of(L))
    return err = "luaflame is already running (call luaflame.stop() first)", false;
  if (live &&
      !(sessions::g_table.key_or.load(std::memory_order_relaxed) == 0 && s->layout.global_ok))
    return err =
               "luaflame is already running on another Lua state of this process (lua_State.l_G "
               "not verified on this Lua: its states cannot be told apart)",
           false;
  s->slot = sessions::add(s, sessions::key_of(L));
  if (s->slot < 0)
    return err = "too many Lua states profiled at once (" + std::to_string(sessions::kMax) + ")",
           false;
  return true;
}

// Trace mode keys its shadow frames by CallInfo (tracer.cpp): on 5.2+ it
// walks CallInfo.previous; on 5.1 (an array) it reads the caller's opcode
// to tell a tail call. Either read unverified: refused, with the reason.
bool trace_refused(const Session& s, std::string& err) {
  if (LUA_VERSION_NUM == 501 && !s.layout.tail51_ok)
    err =
        "trace mode needs Lua 5.1's CallInfo array (to tell tail calls from calls), not "
        "verified on this Lua";
  else if (LUA_VERSION_NUM > 501 && !s.ci_walk_ok)
    err = "trace mode needs CallInfo.previous, not verified on this Lua (" + s.layout.why + ")";
  else
    return false;
  return true;
}

}  // namespace

bool start(lua_State* L, const Options& o, std::string& err) {
  if (sessions::of(L))
    return err = "luaflame is already running (call luaflame.stop() first)", false;
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    std::atexit(at_process_exit);
    pthread_atfork(nullptr, nullptr, detach_in_child);
  });
  Streamer::set_exit_handler(at_process_exit);  // registered again after httplib's first answer
  auto s = std::make_unique<Session>(L, o);
  s->layout = luaint::probe(L);
  if (s->layout.mem_error) return err = "not enough memory", false;
  s->ci_walk_ok = s->layout.ci_prev_ok;
  if (!s->layout.lua_ident_ok)
    s->tracer.ident_lua = -1;  // the call cache names Lua calls through lua_getinfo
  if (!s->layout.c_ident_ok) s->tracer.ident_c = -1;
  // Two functions defined on one line are two frames (frames.hpp).
  if (s->layout.proto_ok) s->frames.proto_of = luaint::proto_of;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  s->main_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  preset_coroutine_frames(s->frames);
  if (!start_step(L, start_frames_body, s.get())) return err = "not enough memory", false;
  if (s->opt.sample) s->sampling.hook_frame = s->frames.named("[luaflame] hook");
  s->sampling.show_profiler = s->opt.show_profiler;
  s->hooks.keep_start_hook(L);
  s->coroutines.start(L);
  s->acct.start_wall = now_ns();
  s->acct.start_unix = unix_now_ns();
  if (pthread_getcpuclockid(pthread_self(), &s->lua_cpu_clock) != 0) s->opt.cpu_clock = false;
  s->acct.start_clock = s->clock_ns_read();
  s->tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (s->opt.trace) {
    if (trace_refused(*s, err)) return false;
    s->tracer.start(L, !s->hooks.start_hook().hook);  // a hook to forward: the slow path
  }
  if (!publish(s.get(), L, err)) return false;  // s deletes it
  Session* raw = s.release();                   // the table owns it from here: stop() deletes it
  if (raw->opt.alloc && !raw->start_alloc(err)) {
    stop_session(raw, L);
    return false;
  }
  if (!start_step(L, start_install_body, raw)) {
    stop_session(raw, L);
    return err = "not enough memory", false;
  }
  // The trace hook last: the protected call above is not the program's.
  if (raw->opt.trace) {
    lua_sethook(L, lf_hook, raw->hooks.base_mask(), raw->hooks.start_hook().count);
    if (raw->main_L && raw->main_L != L && lua_gethook(raw->main_L) != lf_hook)
      lua_sethook(raw->main_L, lf_hook, raw->hooks.base_mask(), raw->hooks.start_hook().count);
  }
  if (raw->opt.sample &&
      !raw->sampler.start(raw->opt.hz, raw->opt.cpu_clock, raw->lua_cpu_clock, raw->slot, err)) {
    stop_session(raw, L);
    return false;
  }
  raw->start_streaming();
  return true;
}

Summary stop(lua_State* L) {
  if (L) {
    Session* s = sessions::of(L);
    return s ? stop_session(s, L) : Summary{};
  }
  Summary last;
  std::vector<Session*> all;
  {
    std::lock_guard<std::mutex> lock(ending_mutex());
    sessions::each([&](Session* s) { all.push_back(s); });
  }
  for (Session* s : all) last = stop_session(s, nullptr);
  return last;
}

namespace {

Summary stop_session(Session* s, lua_State* L) {
  Summary sum;
  ending_begin_stop(*s);
  const SamplerKind sampler_kind = s->sampler.kind();
  if (s->opt.sample) s->sampler.stop();
  if (L) {
    s->hooks.begin_critical();
    s->hooks.disarm();
    s->hooks.end_critical_stopped();
    if (s->opt.trace) {
      s->tracer.charge_now();
      s->restore_program_hooks(L);  // session_hooks.cpp
    }
    restore_coroutine_wrappers(L);
    closer::drop(L);
  }
  const HookChain::Chained before = s->hooks.start_hook();
  set_hook_after_stop(sessions::key_of(s->main_L), before.hook, before.mask, before.count);
  // Detached before the final collection: finalizers it runs (our closer
  // among them) must not see a session that is going away.
  {
    std::lock_guard<std::mutex> lock(ending_mutex());
    sessions::remove(s->slot);
  }
  if (s->opt.alloc) s->stop_alloc(L, !t_closing);
  fill_summary(s, sampler_kind, sum);
  s->output.write(sum);
  // Always said, even with quiet: a profile that was not written (or was cut).
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (sum.files_failed) g_output_failed = true;
  if (s->streamer) s->streamer->finish(sum);
  ending_stopped(*s);
  delete s;
  return sum;
}

// The summary of a run that ends (stop_session): its counts and clocks.
void fill_summary(const Session* s, SamplerKind sampler_kind, Summary& sum) {
  sum.mode = mode_name(s->opt);
  sum.lua = vm_release();
  sum.metrics = s->metrics;
  sum.wall_ns = now_ns() - s->acct.start_wall;
  const uint64_t clk = s->clock_ns_last();
  sum.clock_ns = s->clock_before_ns + (clk > s->acct.start_clock ? clk - s->acct.start_clock : 0);
  sum.hz_asked = s->opt.hz;
  if (s->opt.sample) {
    sum.samples_asked = static_cast<uint64_t>(static_cast<double>(sum.clock_ns) * s->opt.hz / 1e9);
    sum.sample_events = s->acct.sample_events;
    sum.sampler = sampler_kind;
    sum.samples = s->acct.samples;
    sum.hz_delivered = sum.clock_ns ? static_cast<double>(s->acct.sample_events) * 1e9 /
                                          static_cast<double>(sum.clock_ns)
                                    : 0;
  }
  // Trace hooks: the mean of the measured events (1 in 256, wall ticks)
  // leaving out those the thread was preempted in (one preempted
  // measurement would stand for 255 events: "5419 ms in hooks" for a 3.4 s
  // run), times the events. The time in hooks cannot exceed the thread's
  // CPU time: that bounds it when the clock is the CPU's.
  if (s->opt.trace && s->tracer.hook_kept_n)
    sum.hook_ns =
        s->acct.hook_ns +
        s->tracer.tclock.to_ns(static_cast<uint64_t>(static_cast<double>(s->tracer.hook_kept) /
                                                     static_cast<double>(s->tracer.hook_kept_n) *
                                                     static_cast<double>(s->tracer.trace_events)));
  else
    sum.hook_ns = s->acct.hook_ns;
  if (s->opt.cpu_clock && sum.hook_ns > sum.clock_ns) sum.hook_ns = sum.clock_ns;
  sum.hook_calls = s->acct.hook_calls + s->tracer.fast_events();
  sum.fast_paths = s->layout.on();
  sum.fast_paths_off = s->layout.why;
  sum.samples_moved = s->acct.samples_moved;
  sum.samples_in_hooks = s->acct.samples_in_hooks;
  sum.profiler_shown = s->opt.show_profiler;
  sum.calls = s->acct.calls;
  sum.nodes = s->tree.size();
  sum.frames = s->names.size();
  sum.memory_bytes = s->memory_bytes();
  if (s->col_abytes >= 0) {
    sum.alloc_bytes = s->alloc_total_bytes;
    sum.alloc_count = s->alloc_total_count;
    for (uint32_t i = 0; i < s->tree.size(); ++i) sum.live_bytes += s->tree.value(i, s->col_live);
  }
}

}  // namespace

void flush(lua_State* L) {
  Session* s = sessions::of(L);
  if (!s) return;
  Summary written;
  s->output.write(written);
  for (const auto& e : written.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (s->streamer) s->streamer->flush_now();
}

bool folded(lua_State* L, const std::string& metric, std::string& out, std::string& err) {
  Session* s = sessions::of(L);
  if (!s) return err = "luaflame is not running", false;
  const int col = s->column_of(metric, err);
  if (col < 0) return false;
  if (s->opt.trace) s->tracer.charge_now();
  out = s->output.folded_text(col);
  return true;
}

}  // namespace lfc

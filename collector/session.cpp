// The session's life: start, the hook every profiled thread runs, the
// coroutine.resume / coroutine.wrap wrappers that tell which coroutine
// runs, and stop. Sampling, tracing, allocation and streaming live in their
// own files.
#include "session.hpp"

#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "alloc.hpp"
#include "streamer.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

std::atomic<Session*> g_session{nullptr};
bool g_report_at_exit = false;
bool g_output_failed = false;

namespace {

// The hook left on threads after stop (coroutines created while profiling
// inherit ours): on their next event they take this one back.
lua_Hook g_after_hook = nullptr;
int g_after_mask = 0, g_after_count = 0;

const char* const kOrigResume = "luaflame.orig.resume";
const char* const kOrigWrap = "luaflame.orig.wrap";

int event_mask(int ev) {
  return ev == LUA_HOOKTAILCALL ? LUA_MASKCALL : (1 << ev);
}

}  // namespace

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t unix_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Session::Session(lua_State* L, const Options& o)
    : opt(o),
      metrics(metrics_of(o)),
      tree(static_cast<int>(metrics.size())),
      start_L(L),
      main_L(L) {
  if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const std::string& m = metrics[i];
    int c = static_cast<int>(i);
    if (m == "samples")
      col_samples = c;
    else if (m == "time")
      col_time = c;
    else if (m == "calls")
      col_calls = c;
    else if (m == "alloc_bytes")
      col_abytes = c;
    else if (m == "alloc_count")
      col_acount = c;
    else if (m == "live_bytes")
      col_live = c;
  }
  tree.overflow_frame = frames.named("[luaflame] too many stacks");
}

uint64_t Session::clock_ns_read() const {
  timespec ts;
  if (clock_gettime(opt.cpu_clock ? lua_cpu_clock : CLOCK_MONOTONIC, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::size_t Session::memory_bytes() const {
  std::size_t b = sizeof(Session) + tree.memory_bytes() + frames.memory_bytes();
  for (const auto& kv : shadows) b += 64 + kv.second.stack.capacity() * sizeof(Shadow::Entry);
  b += scratch.capacity() * 4 + chain.capacity() * sizeof(void*);
  b += call_cache.capacity() * sizeof(CallCache) + ident_frames.size() * 64;  // tracer.cpp
  return b;
}

// ---------------------------------------------------------------- hooks

// lf_hook itself (the hot path) is in tracer.cpp.
void lf_hook_after_stop(lua_State* L, lua_Debug* ar) {
  lua_sethook(L, g_after_hook, g_after_mask, g_after_count);
  if (g_after_hook && (g_after_mask & event_mask(ar->event))) g_after_hook(L, ar);
}

// What a hook event does besides tracing: a sample or allocations pending
// on an armed thread, and the chained hook. lf_hook calls it only when a
// thread is armed or a hook was there before start.
void Session::hook_rest(lua_State* L, lua_Debug* ar, int ev) {
  const bool was_armed = armed && armed_L == L;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // The hook the thread had before we armed it gets exactly its events:
  // those of its own mask, and its count event only when its count is due.
  const Chained own = chained_for(L);
  lua_Hook fwd = own.hook;
  int fwd_mask = own.mask;
  bool count_due = false;
  if (was_armed) {
    const bool was_busy = alloc && alloc->busy;
    if (alloc) alloc->busy = true;  // what the hook allocates is the collector's
    if (armed_hook != lf_hook) fwd = armed_hook, fwd_mask = armed_mask;
    const int consumed = ev == LUA_HOOKCOUNT ? 1 : 0;
    count_due = armed_left > 0 && armed_left <= consumed;
    if (owed.load(std::memory_order_relaxed)) take_sample(L);
    if (alloc_pending.load(std::memory_order_relaxed)) take_alloc(L);
    begin_critical();
    disarm(consumed);
    end_critical();
    if (alloc) alloc->busy = was_busy;
  }
  if (fwd && fwd != lf_hook && (fwd_mask & event_mask(ev)) &&
      (ev != LUA_HOOKCOUNT || !was_armed || count_due))
    fwd(L, ar);
}

void Session::install_thread_hook(lua_State* L, lua_State* co) {
  if (co == armed_L) return;
  lua_Hook h = lua_gethook(co);
  if (opt.trace) {
    if (h != lf_hook || lua_gethookmask(co) != thread_mask(co)) {
      lua_sethook(co, lf_hook, thread_mask(co), chained_for(co).count);
      Shadow& sh = shadows[co];
      sh.stack.clear();
      seed_shadow(co, sh, L);
    }
  } else if (h == lf_hook) {
    // Inherited from a thread that was armed when it created this one.
    const Chained c = chained_for(co);
    lua_sethook(co, c.hook, c.mask, c.count);
  }
}

// ---------------------------------------------------------------- coroutines

void Session::enter(lua_State* L, lua_State* co) {
  begin_critical();
  chain.push_back(co);
  current.store(co, std::memory_order_relaxed);
  if (armed) disarm(), arm();  // the pending sample belongs to what runs now
  install_thread_hook(L, co);
  if (opt.trace) {
    charge_now();
    Shadow& parent = shadows[L];
    Shadow& sh = shadows[co];
    if (sh.root != parent.top()) reroot(sh, parent.top());
    last_L = co;
    last_sh = &sh;
  }
  end_critical();
}

void Session::leave(lua_State* L, lua_State* co) {
  begin_critical();
  if (!chain.empty() && chain.back() == co)
    chain.pop_back();
  else
    for (std::size_t i = chain.size(); i-- > 0;)
      if (chain[i] == co) {
        chain.erase(chain.begin() + i);
        break;
      }
  if (chain.empty()) chain.push_back(L);
  current.store(chain.back(), std::memory_order_relaxed);
  if (armed && armed_L == co) disarm(), arm();
  if (opt.trace) {
    charge_now();
    last_L = L;
    last_sh = &shadows[L];
    if (lua_status(co) != LUA_YIELD) shadows.erase(co);  // finished or failed: its stack is gone
  }
  end_critical();
}

namespace {

// lcorolib.c's auxresume, with the session told of the switch.
int aux_resume(lua_State* L, lua_State* co, int narg) {
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  lua_xmove(L, co, narg);
  Session* s = g_session.load(std::memory_order_relaxed);
  if (s) s->enter(L, co);
  int nres = 0;
  int status = lua_resume(co, L, narg, &nres);
  Session* s2 = g_session.load(std::memory_order_relaxed);
  if (s2 && s2 == s) s2->leave(L, co);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1);
  return -1;
}

// coroutine.resume, as lcorolib.c's luaB_coresume.
int lf_resume(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
#if LUA_VERSION_RELEASE_NUM >= 50406
  luaL_argexpected(L, co, 1, "coroutine");  // lcorolib.c's getco says "coroutine" from 5.4.6
#else
  luaL_argexpected(L, co, 1, "thread");
#endif
  int r = aux_resume(L, co, lua_gettop(L) - 1);
  if (r < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(r + 1));
  return r + 1;
}

// The function coroutine.wrap returns, as lcorolib.c's auxwrap.
int lf_wrap_call(lua_State* L) {
  lua_State* co = lua_tothread(L, lua_upvalueindex(1));
  int r = aux_resume(L, co, lua_gettop(L));
  if (r < 0) {
    int stat = lua_status(co);
    if (stat != LUA_OK && stat != LUA_YIELD) {
      stat = lua_resetthread(co);  // close its to-be-closed variables
      lua_xmove(co, L, 1);
    }
    if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
      luaL_where(L, 1);
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return r;
}

// coroutine.wrap, as lcorolib.c's luaB_cowrap.
int lf_wrap(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State* NL = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, NL, 1);
  lua_pushcclosure(L, lf_wrap_call, 1);
  return 1;
}

// Swaps coroutine.resume/wrap for ours, keeping the originals in the registry.
void install_coroutine_wrappers(lua_State* L) {
  lua_getglobal(L, "coroutine");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "resume");
  lua_setfield(L, LUA_REGISTRYINDEX, kOrigResume);
  lua_getfield(L, -1, "wrap");
  lua_setfield(L, LUA_REGISTRYINDEX, kOrigWrap);
  lua_pushcfunction(L, lf_resume);
  lua_setfield(L, -2, "resume");
  lua_pushcfunction(L, lf_wrap);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
}

// Puts the originals back where ours still are.
void restore_coroutine_wrappers(lua_State* L) {
  lua_getglobal(L, "coroutine");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  const char* names[] = {"resume", "wrap"};
  const char* keys[] = {kOrigResume, kOrigWrap};
  lua_CFunction ours[] = {lf_resume, lf_wrap};
  for (int i = 0; i < 2; ++i) {
    lua_getfield(L, -1, names[i]);
    bool mine = lua_tocfunction(L, -1) == ours[i];
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, keys[i]);
    if (mine && !lua_isnil(L, -1))
      lua_setfield(L, -2, names[i]);
    else
      lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

bool g_closing = false;  // stop() from the lua_close finalizer: no collection there

// lua_close runs this finalizer: the session ends with the state.
int on_state_close(lua_State* L) {
  Session* s = g_session.load();
  if (s && s->main_L == L) {
    g_closing = true;
    Summary sum = stop(L);
    g_closing = false;
    if (g_report_at_exit || !sum.fallback_file.empty() || !sum.stream_error.empty())
      std::fprintf(stderr, "%s", format_summary(sum).c_str());
  }
  return 0;
}

void at_process_exit() {
  if (!g_session.load()) return;
  Summary sum = stop(nullptr);
  if (g_report_at_exit || !sum.fallback_file.empty() || !sum.stream_error.empty())
    std::fprintf(stderr, "%s", format_summary(sum).c_str());
}

void register_close_finalizer(lua_State* L) {
  lua_newuserdatauv(L, 1, 0);
  lua_newtable(L);
  lua_pushcfunction(L, on_state_close);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "luaflame.closer");
}

}  // namespace

bool running() {
  return g_session.load() != nullptr;
}

bool start(lua_State* L, const Options& o, std::string& err) {
  if (g_session.load())
    return err = "luaflame is already running (call luaflame.stop() first)", false;
  static std::once_flag exit_once;
  std::call_once(exit_once, [] { std::atexit(at_process_exit); });
  auto s = std::make_unique<Session>(L, o);
  s->layout = luaint::probe(L);
  s->ci_walk_ok = s->layout.ci_prev_ok;
  if (!s->layout.lua_ident_ok)
    s->ident_lua = -1;  // the call cache names Lua calls through lua_getinfo
  if (!s->layout.c_ident_ok) s->ident_c = -1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  s->main_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  s->frames.preset(lf_resume, "[C] coroutine.resume");
  s->frames.preset(lf_wrap, "[C] coroutine.wrap");
  s->frames.preset(lf_wrap_call, "[C] <wrapped coroutine>");
  s->frames.preset_makers(L);
  s->prev_hook = lua_gethook(L);
  s->prev_mask = s->prev_hook == lf_hook ? 0 : lua_gethookmask(L);
  s->prev_count = s->prev_hook == lf_hook ? 0 : lua_gethookcount(L);
  if (s->prev_hook == lf_hook) s->prev_hook = nullptr;
  s->chain.push_back(L);
  s->current.store(L);
  s->start_wall = now_ns();
  s->start_unix = unix_now_ns();
  s->lua_thread = pthread_self();
  if (pthread_getcpuclockid(s->lua_thread, &s->lua_cpu_clock) != 0) s->opt.cpu_clock = false;
  s->start_clock = s->clock_ns_read();
  if (s->opt.trace) {
    if (!s->ci_walk_ok)
      return err = "trace mode needs Lua 5.4's CallInfo layout (this Lua differs)", false;
    Shadow& sh = s->shadows[L];
    s->seed_shadow(L, sh, L);
    s->last_L = L;
    s->last_sh = &sh;
    s->tclock.init();
    s->call_cache.resize(std::size_t{1} << CallCache::kBits);
    s->trace_fast_ok = s->tclock.tsc && !s->prev_hook;  // else every event takes Session::hook
    s->last_tick = s->tclock.now();
  }
  Session* raw = s.get();
  g_session.store(raw);
  if (raw->opt.alloc && !raw->start_alloc(err)) {
    g_session.store(nullptr);
    return false;
  }
  if (raw->opt.trace) {
    lua_sethook(L, lf_hook, raw->base_mask(), raw->prev_count);
    if (raw->main_L && raw->main_L != L && lua_gethook(raw->main_L) != lf_hook)
      lua_sethook(raw->main_L, lf_hook, raw->base_mask(), raw->prev_count);
  }
  install_coroutine_wrappers(L);
  if (raw->opt.trace) install_hook_wrappers(L);
  register_close_finalizer(L);
  if (raw->opt.sample && !raw->start_sampler(err)) {
    s.release();
    stop(L);
    return false;
  }
  if (!raw->opt.server.empty()) {
    raw->streamer = std::make_unique<Streamer>(*raw);
    raw->streamer->start();
  }
  s.release();
  return true;
}

Summary stop(lua_State* L) {
  Summary sum;
  Session* s = g_session.load();
  if (!s) return sum;
  if (s->opt.sample) s->stop_sampler();
  if (L) {
    s->begin_critical();
    s->disarm();
    s->in_critical = 0;
    if (s->opt.trace) {
      s->charge_now();
      s->restore_program_hooks(L);  // hooks.cpp
    }
    restore_coroutine_wrappers(L);
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "luaflame.closer");
  }
  g_after_hook = s->prev_hook;
  g_after_mask = s->prev_mask;
  g_after_count = s->prev_count;
  // Detached before the final collection: finalizers it runs (our closer
  // among them) must not see a session that is going away.
  g_session.store(nullptr);
  if (s->opt.alloc) s->stop_alloc(L, !g_closing);

  sum.mode = s->opt.trace ? (s->opt.sample ? "both" : "trace") : (s->opt.sample ? "sample" : "");
  if (s->opt.alloc) sum.mode += sum.mode.empty() ? "alloc" : "+alloc";
  sum.metrics = s->metrics;
  sum.wall_ns = now_ns() - s->start_wall;
  uint64_t clk = s->clock_ns_read();
  sum.clock_ns = clk > s->start_clock ? clk - s->start_clock : 0;
  sum.hz_asked = s->opt.hz;
  if (s->opt.sample) {
    sum.samples_asked = static_cast<uint64_t>(static_cast<double>(sum.clock_ns) * s->opt.hz / 1e9);
    sum.sample_events = s->sample_events;
    sum.samples = s->samples;
    sum.hz_delivered = sum.clock_ns ? static_cast<double>(s->sample_events) * 1e9 /
                                          static_cast<double>(sum.clock_ns)
                                    : 0;
  }
  // Trace hooks: the mean of the measured events (1 in 256, wall ticks)
  // leaving out those the thread was preempted in (one preempted
  // measurement would stand for 255 events: "5419 ms in hooks" for a 3.4 s
  // run), times the events. The time in hooks cannot exceed the thread's
  // CPU time: that bounds it when the clock is the CPU's.
  if (s->opt.trace && s->hook_kept_n)
    sum.hook_ns =
        s->hook_ns + s->tclock.to_ns(static_cast<uint64_t>(static_cast<double>(s->hook_kept) /
                                                           static_cast<double>(s->hook_kept_n) *
                                                           static_cast<double>(s->trace_events)));
  else
    sum.hook_ns = s->hook_ns;
  if (s->opt.cpu_clock && sum.hook_ns > sum.clock_ns) sum.hook_ns = sum.clock_ns;
  sum.hook_calls = s->hook_calls;
  sum.fast_paths = s->layout.on();
  sum.fast_paths_off = s->layout.why;
  sum.samples_moved = s->samples_moved;
  sum.calls = s->calls;
  sum.nodes = s->tree.size();
  sum.frames = s->names.size();
  sum.memory_bytes = s->memory_bytes();
  if (s->col_abytes >= 0) {
    sum.alloc_bytes = s->alloc_total_bytes;
    sum.alloc_count = s->alloc_total_count;
    for (uint32_t i = 0; i < s->tree.size(); ++i) sum.live_bytes += s->tree.value(i, s->col_live);
  }
  s->write_outputs(sum);
  // Always said, even with quiet: a profile that was not written (or was cut).
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (sum.files_failed) g_output_failed = true;
  if (s->streamer) s->streamer->finish(sum);
  delete s;
  return sum;
}

void flush() {
  Session* s = g_session.load();
  if (!s) return;
  Summary written;
  s->write_outputs(written);
  for (const auto& e : written.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (s->streamer) s->streamer->flush_now();
}

bool folded(const std::string& metric, std::string& out, std::string& err) {
  Session* s = g_session.load();
  if (!s) return err = "luaflame is not running", false;
  int col = 0;
  if (!metric.empty()) {
    col = -1;
    for (std::size_t i = 0; i < s->metrics.size(); ++i)
      if (s->metrics[i] == metric) col = static_cast<int>(i);
    if (col < 0) {
      err = "metric '" + metric + "' is not recorded in this mode (recorded:";
      for (const auto& m : s->metrics) err += " " + m;
      err += ")";
      return false;
    }
  }
  if (s->opt.trace) s->charge_now();
  out = s->folded_text(col);
  return true;
}

}  // namespace lfc

// The sampler. A helper thread watches the Lua thread's CPU clock (or the
// wall clock) at fine resolution, because the kernel's CPU-time timers only
// tick at the scheduler frequency (250 Hz here): asking them for 1 kHz gives
// 250 Hz. Each time another period of the clock has passed, the thread
// sends a signal to the Lua thread; the handler only arms a one-shot hook
// (count 1 + return, so a C function that is running still takes the
// sample as it returns); the hook records the stack and disarms. Between
// samples the program runs with no hook at all.
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "session.hpp"

namespace lfc {

namespace {

constexpr std::size_t kMaxDepth = 4000;  // frames kept per sample (leaf side)

void on_signal(int) {
  int saved = errno;
  Session* s = g_session.load(std::memory_order_relaxed);
  if (s) {
    if (s->in_critical)
      s->deferred = 1;
    else
      s->note_position(), s->arm();
  }
  errno = saved;
}

void sleep_ns(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void sampler_main(Session* s) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake within a microsecond, not 50
  const uint64_t period = static_cast<uint64_t>(1e9 / s->opt.hz);
  uint64_t next = s->clock_ns_read() + period;
  while (!s->sampler_stop.load(std::memory_order_relaxed)) {
    uint64_t now = s->clock_ns_read();
    if (now == 0) break;  // the Lua thread is gone
    if (now >= next) {
      uint64_t k = 1 + (now - next) / period;
      next += k * period;
      s->owed.fetch_add(k, std::memory_order_relaxed);
      pthread_kill(s->lua_thread, s->signo);
    }
    // The clock advances at most as fast as wall time: sleeping until the
    // next period's wall-time lower bound never oversleeps a busy thread.
    uint64_t wait = next - now;
    if (wait > 20000000) wait = 20000000;
    if (wait < 20000) wait = 20000;
    sleep_ns(wait);
  }
}

// A signal nobody else handles: SIGPROF, else a free real-time one.
int pick_signal() {
  struct sigaction cur;
  if (sigaction(SIGPROF, nullptr, &cur) == 0 &&
      (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) && !(cur.sa_flags & SA_SIGINFO))
    return SIGPROF;
  for (int sig = SIGRTMIN + 4; sig <= SIGRTMAX; ++sig)
    if (sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL &&
        !(cur.sa_flags & SA_SIGINFO))
      return sig;
  return 0;
}

}  // namespace

void Session::arm() {
  if (armed) {
    // Still ours: the sample is pending. Replaced (the program called
    // debug.sethook meanwhile): its hook stays, and we arm again.
    if (!armed_L || lua_gethook(armed_L) == lf_hook) return;
    armed = 0;
  }
  lua_State* L = current.load(std::memory_order_relaxed);
  if (!L) return;
  lua_Hook h = lua_gethook(L);
  if (h == lf_hook || h == nullptr) {
    // Back to the thread's base state afterwards (ours when tracing).
    const Chained c = chained_for(L);
    armed_hook = (opt.trace) ? lf_hook : c.hook;
    armed_mask = (opt.trace) ? thread_mask(L) : (c.hook ? c.mask : 0);
    armed_count = c.count;
    if (h == nullptr && !opt.trace) armed_hook = nullptr, armed_mask = 0, armed_count = 0;
  } else {
    armed_hook = h;
    armed_mask = lua_gethookmask(L);
    armed_count = lua_gethookcount(L);
  }
  armed_L = L;
  // The thread's own count progress. 0 here means the signal fell inside
  // luaG_traceexec between its decrement and its reset: the count event it
  // is about to raise is the program's (armed_left 1 forwards it).
  armed_left = 0;
  if ((armed_mask & LUA_MASKCOUNT) && layout.hookcount_off) {
    const int left = luaint::hookcount(L, layout.hookcount_off);
    armed_left = left > 0 ? left : 1;
  }
  lua_sethook(L, lf_hook, armed_mask | LUA_MASKCOUNT | LUA_MASKRET, 1);
  armed = 1;
}

void Session::disarm(int consumed) {
  if (!armed) return;
  if (armed_L) {
    lua_sethook(armed_L, armed_hook, armed_mask, armed_count);
    // lua_sethook restarted the thread's own count: give back its progress
    // (when it is due now, hook_rest forwards the count event and the
    // fresh count stays).
    if (armed_left > consumed && (armed_mask & LUA_MASKCOUNT))
      luaint::set_hookcount(armed_L, layout.hookcount_off, armed_left - consumed);
  }
  armed_L = nullptr;
  armed = 0;
}

void Session::end_critical() {
  for (;;) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (deferred) {
      deferred = 0;
      arm();
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    in_critical = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!deferred) return;
    in_critical = 1;
  }
}

void Session::note_position() {
  if (!layout.state_ci_ok || !ci_walk_ok) return;
  lua_State* L = current.load(std::memory_order_relaxed);
  const sig_atomic_t n = sig_npos;
  if (!L || n >= kSigPos) return;  // full: the last position takes the rest (take_sample)
  sig_pos[n] = SigPos{L, luaint::state_ci(L)};
  std::atomic_signal_fence(std::memory_order_seq_cst);
  sig_npos = n + 1;
}

bool Session::walk(lua_State* L, std::vector<uint32_t>& out, lua_State* from_T,
                   const void* from_ci) {
  out.clear();
  int at = -1;
  for (std::size_t i = chain.size(); i-- > 0;)
    if (chain[i] == L) {
      at = static_cast<int>(i);
      break;
    }
  int first = at < 0 ? 0 : at;
  if (from_T && from_T != L) {
    // The recorded thread must be one of L's resumers.
    if (at < 0) return false;
    first = -1;
    for (int i = at - 1; i >= 0; --i)
      if (chain[static_cast<std::size_t>(i)] == from_T) {
        first = i;
        break;
      }
    if (first < 0) return false;
  }
  lua_Debug ar;
  for (int t = first; t >= 0 && out.size() < kMaxDepth; --t) {
    lua_State* T = at < 0 ? L : chain[static_cast<std::size_t>(t)];
    const bool leaf = opt.lines && out.empty();
    if (!lua_getstack(T, 0, &ar)) {
      if (T == from_T) return false;
      continue;
    }
    if (ci_walk_ok) {
      const void* top = ar.i_ci;
      if (T == from_T) {
        // The recorded CallInfo must still be on the stack (at or below the
        // top): a frame entered since is not the one the signal fell in.
        const void* c = top;
        while (c && c != from_ci) c = ci_prev(c);
        if (!c) return false;
        top = from_ci;
      }
      // Follow the CallInfo list directly: lua_getstack(level) costs O(level).
      for (const void* ci = top; ci && ci_prev(ci) && out.size() < kMaxDepth; ci = ci_prev(ci)) {
        ar.i_ci = static_cast<struct CallInfo*>(const_cast<void*>(ci));
        const bool line = leaf && out.empty();
        lua_getinfo(L, line ? "Sl" : "S", &ar);
        out.push_back(frames.of(L, &ar, line));
      }
    } else {
      for (int level = 0; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
        const bool line = leaf && level == 0;
        lua_getinfo(L, line ? "Sl" : "S", &ar);
        out.push_back(frames.of(L, &ar, line));
      }
    }
  }
  // The host's own C entry (lua.c's pmain, the runner) is not the program's.
  while (!out.empty() && frames.is_c(out.back())) out.pop_back();
  if (out.size() >= kMaxDepth) out.push_back(frames.named("[luaflame] truncated"));
  return true;
}

uint32_t Session::path_node(const std::vector<uint32_t>& leaf_first) {
  uint32_t node = 0;
  for (std::size_t i = leaf_first.size(); i-- > 0;) node = tree.child(node, leaf_first[i]);
  return node;
}

void Session::take_sample(lua_State* L) {
  uint64_t t0 = opt.trace ? tclock.now() : now_ns();
  // Owed periods and recorded positions, taken together so that no signal
  // lands between the two reads.
  SigPos pos[kSigPos];
  begin_critical();
  uint64_t w = owed.exchange(0, std::memory_order_relaxed);
  const int n = sig_npos;
  for (int i = 0; i < n; ++i) pos[i] = sig_pos[i];
  sig_npos = 0;
  end_critical();
  if (!w) return;
  // One period per recorded position, the rest to the last one (signals
  // coalesce, and a full buffer keeps the last slot); none recorded (a
  // signal deferred by a critical section, or no layout): the hook's stack.
  for (int i = 0; i < n || (i == 0 && n == 0); ++i) {
    const uint64_t k =
        n == 0 ? w
               : (i + 1 < n
                      ? 1
                      : (w > static_cast<uint64_t>(n - 1) ? w - static_cast<uint64_t>(n - 1) : 1));
    uint32_t node = 0;
    if (!traced_node(L, n > 0 ? pos[i].L : L, n > 0 ? pos[i].ci : nullptr, node)) {
      bool ok = n > 0 && walk(L, scratch, pos[i].L, pos[i].ci);
      if (!ok) {
        if (n > 0) samples_moved += k;
        walk(L, scratch);
      }
      node = path_node(scratch);
    }
    tree.add(node, col_samples, k);
    samples += k;
  }
  ++sample_events;
  if (opt.trace) {
    uint64_t dt = tclock.now() - t0;
    hook_ns += tclock.to_ns(dt);
    last_tick += dt;  // not charged to the program's frames
  } else {
    hook_ns += now_ns() - t0;
  }
}

bool Session::start_sampler(std::string& err) {
  signo = pick_signal();
  if (!signo)
    return err = "no free signal for the sampler (SIGPROF and the real-time signals are taken)",
           false;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, &old_action) != 0)
    return err = std::string("sigaction: ") + std::strerror(errno), false;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  sampler_stop.store(false);
  try {
    sampler = std::thread(sampler_main, this);
  } catch (const std::exception& e) {
    sigaction(signo, &old_action, nullptr);
    signo = 0;
    return err = std::string("cannot start the sampler thread: ") + e.what(), false;
  }
  return true;
}

void Session::stop_sampler() {
  if (!signo) return;
  sampler_stop.store(true);
  if (sampler.joinable()) sampler.join();
  // A signal sent just before the join may still be pending: take it
  // while blocked, then give the signal back to its previous owner.
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  sigset_t pending;
  timespec zero{0, 0};
  while (sigpending(&pending) == 0 && sigismember(&pending, signo))
    sigtimedwait(&set, nullptr, &zero);
  sigaction(signo, &old_action, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  signo = 0;
}

}  // namespace lfc

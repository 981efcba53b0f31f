// The session's construction, the table of live sessions that the hooks,
// the wrappers and the signal handler read (sessions.hpp), and the signal
// handler itself (the sampler's, routed here by slot).
#include <sched.h>
#include <ucontext.h>

#include <cerrno>

#include "vm/puc/alloc.hpp"
#include "vm/puc/session.hpp"
#include "vm/puc/sessions.hpp"

namespace lfc {

namespace sessions {

Table g_table;
std::atomic<int> g_used{0};

Session* of_rest(std::uintptr_t key) noexcept {
  const int h = g_table.hints[hint_of(key)].load(std::memory_order_relaxed);
  if (h > 0 && g_slots[h].key.load(std::memory_order_acquire) == key)
    return g_slots[h].session.load(std::memory_order_acquire);
  const int n = g_used.load(std::memory_order_acquire);
  for (int i = 1; i < n; ++i)
    if (g_slots[i].key.load(std::memory_order_acquire) == key)
      return g_slots[i].session.load(std::memory_order_acquire);
  return nullptr;
}

int add(Session* s, std::uintptr_t key) {
  for (int i = 0; i < kMax; ++i) {
    if (g_slots[i].session.load(std::memory_order_relaxed)) continue;
    g_slots[i].session.store(s, std::memory_order_release);
    g_slots[i].key.store(key, std::memory_order_release);
    g_table.hints[hint_of(key)].store(i, std::memory_order_relaxed);
    if (g_used.load(std::memory_order_relaxed) <= i) g_used.store(i + 1, std::memory_order_release);
    return i;
  }
  return -1;
}

void remove(int slot, bool wait) {
  if (slot < 0 || slot >= kMax) return;
  g_slots[slot].key.store(0, std::memory_order_release);
  g_slots[slot].session.store(nullptr, std::memory_order_release);
  while (wait && g_slots[slot].busy.load(std::memory_order_acquire) != 0) sched_yield();
}

}  // namespace sessions

namespace {

// The instruction a signal interrupted, from the handler's ucontext.
const char* interrupted_pc(void* uctx) {
  if (!uctx) return nullptr;
  const mcontext_t& m = static_cast<ucontext_t*>(uctx)->uc_mcontext;
  // NOLINTBEGIN(performance-no-int-to-ptr): the register holds an address
#if defined(__x86_64__)
  return reinterpret_cast<const char*>(m.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const char*>(m.pc);
#else
  (void)m;
  return nullptr;
#endif
  // NOLINTEND(performance-no-int-to-ptr)
}

}  // namespace

// The sampler's signal handler (the contract: sampler.hpp). The session is the one in
// the slot the timer (or the polling thread's sigqueue) carries, and only
// on the thread that runs its state: a signal the program sends, one left
// pending by a stopped session or one from before the state moved to
// another thread is dropped.
// On Lua 5.1 the interrupted pc goes to foreign::t_own_hook for the test
// of foreign code (foreign.hpp).
void on_sampler_signal(int, siginfo_t* si, void* uctx) noexcept {
  const int saved = errno;
  if (si && (si->si_code == SI_TIMER || si->si_code == SI_QUEUE)) {
    if constexpr (luaint::kRelease == 0) foreign::t_own_hook.pc = interrupted_pc(uctx);
    sessions::Slot* slot = sessions::enter(si->si_value.sival_int);
    if (Session* s = slot ? slot->session.load(std::memory_order_acquire) : nullptr) s->on_signal();
    if (slot) sessions::leave(*slot);
    if constexpr (luaint::kRelease == 0) foreign::t_own_hook.pc = nullptr;
  }
  errno = saved;
}

void Session::on_signal() noexcept {
  if (sampler.on_its_thread())
    on_sample_signal();
  else
    sampler.quiet_here();
}

Session::Session(lua_State* L, const Options& o) : Profile(o, vm_release()), start_L(L), main_L(L) {
  if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
  tree.overflow_frame = frames.named("[luaflame] too many stacks");
}

Session::~Session() = default;  // alloc.hpp included: AllocState is complete

}  // namespace lfc

// A futex word and a thread's start-up, waited for. Internal.
//
// Contract: futex_wait and futex_wake are system calls on a 32-bit atomic
// and nothing else: async-signal-safe (the LuaJIT sampler's handler wakes
// its parked timer), no allocation, no lock. ThreadUp is the sampler
// threads' start: the starter runs the program on only once the new thread
// is in its loop, whose code takes no lock. A thread's start-up (the C
// library's, a sanitizer's) allocates under the allocator's lock, and a
// program that forks right after the profiler started (a prefork host
// forking after its first call) copied that lock held into the child,
// whose own sampler thread then waited on it forever at its start (seen
// under ASan, LLVM 14: tests/attach/fork_host.c on LuaJIT, 1 run in 20).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace lfc {

/// Sleeps while `word` holds `expected`, at most `ns` (or until a wake).
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, uint64_t ns) noexcept {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr,
          0);
}

/// Wakes one waiter on `word`.
inline void futex_wake(std::atomic<uint32_t>& word) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

/// A started thread's "in my loop now": reset() before the thread is made,
/// mark() by the thread as the first thing of its loop, wait() by the starter.
class ThreadUp {
 public:
  void reset() noexcept { up_.store(0); }
  void mark() noexcept {
    up_.store(1);
    futex_wake(up_);
  }
  void wait() noexcept {
    while (up_.load() == 0) futex_wait(up_, 0, 100000000);
  }

 private:
  std::atomic<uint32_t> up_{0};
};

}  // namespace lfc

/* The interruption floor of an attached host, with no profiler:
 * bench/attach/cost.sh preloads this (LD_PRELOAD) into the host with
 * FLOOR_HZ=N. At load it installs a SIGPROF handler that does nothing and a
 * kernel timer on the wall clock that sends SIGPROF at N per second to the
 * thread that loaded it (the host's main thread, where its Lua runs): the
 * signals a sampler at N Hz costs a host whose Lua runs on that thread
 * while it is busy, and nothing else (bench/jit/floor.c's "ktimer" floor
 * for nginx workers). Not a timer on the CPU clock: the kernel fires those
 * only at its tick (250 Hz on Debian's kernels), whatever period is asked,
 * and the first version of this floor did so: 215 signals where luaflame
 * at 1 kHz sent 1,028 on the same nmap scan. The wall timer also wakes
 * the thread while it waits, which luaflame's sampler does not (it paces:
 * sampler_threads.cpp), so on a host that waits the floor errs high.
 *
 * Contract: on_sigprof does nothing (it only exists so the signal does not
 * terminate); it is installed with SA_RESTART, as luaflame's handler is, so
 * the host's system calls restart as they do under the collector. The timer
 * is never deleted: it ends with the process. A host that takes SIGPROF for
 * itself replaces the handler (then the floor is not measured: the script
 * checks the host's output, not this). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_sigprof(int sig) {
  (void)sig;
}

__attribute__((constructor)) static void floor_start(void) {
  const char* v = getenv("FLOOR_HZ");
  const long hz = v ? strtol(v, NULL, 10) : 0;
  if (hz <= 0 || hz > 100000) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) return;
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = gettid();
  timer_t t;
  const long period = 1000000000L / hz;
  struct itimerspec it = {{period / 1000000000L, period % 1000000000L},
                          {period / 1000000000L, period % 1000000000L}};
  if (timer_create(CLOCK_MONOTONIC, &ev, &t) == 0) timer_settime(t, 0, &it, NULL);
}

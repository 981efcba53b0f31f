/* The floor under a 1 kHz sampler in a nginx worker, with no luaflame and
 * no LuaJIT profiler: bench/jit/nginx.sh (FLOOR=1) loads this with LuaJIT's
 * FFI in init_worker_by_lua and calls floor_start(hz, signals).
 *
 * A thread polls the worker thread's CPU clock the way luaflame's LuaJIT
 * timer thread does (collector/vm/luajit/jsampler.cpp: sleep until a period of the
 * worker's CPU could have passed at the share of the wall clock it had, at
 * most 20 ms) and, with signals on, sends SIGPROF to the worker at each
 * period of its CPU, to a handler that does nothing. So "thread" measures
 * the polling thread alone, "signal" adds one signal per period, and what
 * the collector costs beyond them is its own. With signals == 2, no thread:
 * a kernel timer on the wall clock sends the worker SIGPROF at hz ("ktimer";
 * kernel timers on a thread's CPU clock fire only at the kernel's tick, 250
 * Hz in Debian's kernels, the rate jit.p gets), also while it waits.
 *
 * Contract: on_sigprof only counts in a volatile sig_atomic_t that the
 * worker thread reads (async-signal-safe, its only writer is the handler); it is
 * installed with SA_RESTART so nginx's system calls restart as they do under
 * the collector. The thread reads only its own statics and the worker's CPU
 * clock; it never stops (the worker exits with it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static pthread_t worker;
static clockid_t worker_clock;
static uint64_t period;
static int send_signals;

static uint64_t ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static volatile sig_atomic_t taken; /* signals taken: floor_taken() */

static void on_sigprof(int sig) {
  (void)sig;
  taken = taken + 1;
}

static void* poll_worker(void* arg) {
  (void)arg;
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  uint64_t cpu0 = ns(worker_clock), wall0 = ns(CLOCK_MONOTONIC), next = cpu0 + period;
  for (;;) {
    const uint64_t cpu = ns(worker_clock), wall = ns(CLOCK_MONOTONIC);
    if (cpu >= next) {
      next += ((cpu - next) / period + 1) * period;
      if (send_signals) pthread_kill(worker, SIGPROF);
    }
    double share = wall > wall0 ? (double)(cpu - cpu0) / (double)(wall - wall0) : 1;
    share = share > 1 ? 1 : share < 0.02 ? 0.02 : share;
    cpu0 = cpu;
    wall0 = wall;
    double wait = (double)(next - cpu) / share;
    if (wait > 20e6) wait = 20e6;
    const struct timespec ts = {(time_t)(wait / 1e9), (long)((uint64_t)wait % 1000000000u)};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static int start_timer(void) {
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = gettid();
  timer_t t;
  const struct timespec p = {0, (long)period};
  const struct itimerspec it = {p, p};
  return timer_create(CLOCK_MONOTONIC, &ev, &t) == 0 ? timer_settime(t, 0, &it, NULL) : -1;
}

/* Returns 0 when the thread (or timer) runs, -1 when it could not start. */
int floor_start(int hz, int signals) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigprof;
  sa.sa_flags = SA_RESTART;
  if (hz <= 0 || sigaction(SIGPROF, &sa, NULL) != 0) return -1;
  worker = pthread_self();
  if (pthread_getcpuclockid(worker, &worker_clock) != 0) return -1;
  period = 1000000000u / (uint64_t)hz;
  send_signals = signals;
  if (signals == 2) return start_timer();
  pthread_t t;
  if (pthread_create(&t, NULL, poll_worker, NULL) != 0) return -1;
  return pthread_detach(t);
}

/* Signals the worker's handler has taken so far (a check that they come). */
long floor_taken(void) {
  return (long)taken;
}

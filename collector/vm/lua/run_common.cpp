// The runners' shared glue (run_common.hpp), for Lua 5.4 and LuaJIT.
#include "vm/lua/run_common.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::run {

namespace {

lua_State* g_L = nullptr;  // the state a Ctrl-C interrupts (watch_sigint)

void lstop(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "interrupted!");
}

// Signal contract (as lua.c's laction): runs on the Lua thread at any
// instruction; lua_sethook is async-signal-safe by Lua's design (the
// comment above lua_sethook in ldebug.c), and g_L is set before the
// handler is installed and not changed while it is.
void laction(int i) noexcept {
  std::signal(i, SIG_DFL);
  lua_sethook(g_L, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

int g_term_pipe[2] = {-1, -1};
pid_t g_term_pid = 0;

// Signal contract: runs on any thread that does not block SIGTERM, at any
// instruction. Calls only getpid, write, signal and raise (async-signal-safe)
// and reads what watch_sigterm set before installing it. In a forked child
// (another pid: the watcher thread is not there) it dies as unprofiled.
void on_term(int sig) noexcept {
  const int saved = errno;
  if (getpid() != g_term_pid) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  } else {
    const char b = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_term_pipe[1], &b, 1);
  }
  errno = saved;
}

// The watcher thread: SIGINT and SIGTERM blocked here (the handlers are the
// Lua thread's), waits for on_term's byte, finishes the run, dies of SIGTERM.
// Nothing crosses out of it: it catches everything and still dies.
void term_watcher() noexcept {
  char b = 0;
  while (::read(g_term_pipe[0], &b, 1) < 0 && errno == EINTR) {
  }
  try {
    l_message("luaflame", "terminated (SIGTERM): finishing the run with what it holds");
    lfc::finish_for_exit();
  } catch (...) {  // dying anyway: the signal's end, not an exception's
  }
  std::signal(SIGTERM, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(SIGTERM);
  std::_Exit(128 + SIGTERM);  // not reached: SIGTERM's default action ends the process
}

}  // namespace

void watch_sigterm() {
  if (g_term_pid != 0) return;
  if (::pipe2(g_term_pipe, O_CLOEXEC) != 0) return;  // no watcher: SIGTERM kills as unprofiled
  // The thread starts with SIGINT and SIGTERM blocked (inherited mask).
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  try {
    std::thread(term_watcher).detach();
  } catch (const std::exception&) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g_term_pid = getpid();
  std::signal(SIGTERM, on_term);
}

void l_message(const char* pname, const char* msg) {
  if (pname) std::fprintf(stderr, "%s: ", pname);
  std::fprintf(stderr, "%s\n", msg);
  std::fflush(stderr);
}

void watch_sigint(lua_State* L) {
  g_L = L;
  std::signal(SIGINT, laction);
}

void unwatch_sigint() {
  std::signal(SIGINT, SIG_DFL);
}

// Run under lua_pcall (argument 1: the Options): raises start's message,
// pushed protected inside the guard, thrown outside it.
int push_err_body(lua_State* L) LF_LUA_ENTRY {
  const auto* err = static_cast<const std::string*>(lua_touserdata(L, 1));
  lua_pushlstring(L, err->data(), err->size());
  return 1;
}

int start_session(lua_State* L) LF_LUA_ENTRY {
  const Options* o = static_cast<const Options*>(lua_touserdata(L, 1));
  bool ok = false;
  const char* failed = cxx_guard([&] {
    std::string err;
    ok = start(L, *o, err);
    if (!ok) {
      lua_pushcfunction(L, push_err_body);
      lua_pushlightuserdata(L, &err);
      lua_pcall(L, 1, 1, 0);  // the message, or the memory error making it
    }
  });
  if (ok) return 0;
  if (failed) lua_pushfstring(L, "cannot start: %s", failed);
  return lua_error(L);
}

void end_session(lua_State* L, bool quiet) {
  if (!running(L)) return;
  Summary s = stop(L);
  if (!quiet || !s.stream_error.empty() || !s.fallback_file.empty())
    std::fprintf(stderr, "%s", format_summary(s).c_str());
}

}  // namespace lfc::run

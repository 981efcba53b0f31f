// The module's side of `luaflame attach` (docs/attach.md): the preloaded
// shim (collector/attach/shim.cpp) calls these two functions of the
// luaflame.so built for the Lua the host links, through attach.hpp.
//
// Contract: both are called on the host's thread that owns L, from the
// shim's luaL_openlibs and lua_close, never from a signal handler; several
// threads may call them at once for different states (each state its own
// run, where the adapter tells states apart: Lua 5.1-5.4; LuaJIT's
// profiler is one per process, so a second state is not profiled there). Nothing
// crosses back into the host: a C++ exception is caught here, a Lua error
// stays inside lua_pcall (start_session runs under it). The options come
// from LUAFLAME_* in the environment, as for any program.
#include "vm/lua/attach.hpp"

#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/run_common.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

extern bool g_report_at_exit;  // core/profile.hpp

namespace attach {

namespace {

std::atomic<bool> g_quiet{false};
std::atomic<bool> g_said_busy{false};

void say(const char* host, unsigned n, const std::string& what) {
  std::fprintf(stderr, "luaflame attach: %s#%u %s\n", host, n, what.c_str());
  std::fflush(stderr);
}

// FILE.svg -> FILE-N.svg for the state numbered N > 1, so that the runs of
// a host's successive states do not overwrite each other's files; in a
// forked child FILE-pPID.svg (FILE-N-pPID.svg), so that a worker's run and
// its parent's do not either.
std::string numbered(const std::string& output, unsigned n, bool child) {
  if ((n <= 1 && !child) || output.empty()) return output;
  const std::size_t slash = output.rfind('/');
  std::size_t dot = output.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0)
    dot = output.size();
  std::string suffix = n > 1 ? "-" + std::to_string(n) : "";
  if (child) suffix += "-p" + std::to_string(getpid());
  return output.substr(0, dot) + suffix + output.substr(dot);
}

// The options of the environment (LUAFLAME_*): `named` when it names the run.
bool env_options(Options& o, bool& named, std::string& err) {
  named = std::getenv("LUAFLAME_NAME") != nullptr;
  return apply_env(o, err);
}

// What attach adds to them: the name, the tags, the numbered output.
bool attach_options(const char* host, unsigned n, bool child, bool named, Options& o,
                    std::string& err) {
  if (!named) o.name = std::string(host) + "#" + std::to_string(n);
  char hostname[256] = "";
  gethostname(hostname, sizeof hostname - 1);
  std::string tags;
  for (const auto& kv : o.tags) tags += kv.first + "=" + kv.second + ",";
  tags += "program=" + std::string(host) + ",pid=" + std::to_string(getpid());
  if (hostname[0] && !o.tags.count("host")) tags += ",host=" + std::string(hostname);
  if (child) tags += ",parent=" + std::to_string(getppid());  // a worker's master
  if (!set_option(o, "tags", tags, err)) return false;
  if (o.output.empty() && o.server.empty()) o.output = "luaflame.svg";
  o.output = numbered(o.output, n, child);
  return true;
}

struct HostHook {
  lua_Hook f = nullptr;
  int mask = 0, count = 0;
};

// A host that makes its states and then forks its workers (HAProxy's
// master-worker mode, nginx, a prefork server): the child inherits the
// states, and the runs are left behind there (the sampler's timers and
// threads are not inherited). So each state attach started is remembered,
// and in a forked child its run starts again at the first of: the host
// resumes a coroutine of it (resume), or any Lua runs on it however the
// host entered it (restart_hook, set on each such state at the fork:
// lua_pcall, lua_cpcall, lua_call alone, or the Lua that forked going
// on). On the thread that runs it now, with the options of the
// environment attach started it with (nginx gives its workers an
// environment of its own, without LUAFLAME_*). Contract: the
// pthread_atfork handlers hold g_opened_mu across the fork (no thread of
// the parent holds it half-way through a change then); the child's, its
// only thread, adds to g_forks and sets the hooks; the rest under
// g_opened_mu. A state is told by its registry's address, read on its own
// thread: nothing here touches another thread's state but the child
// handler's lua_sethook, which Lua allows from a signal handler.
struct Opened {
  lua_State* L;
  const void* registry;
  std::string host;
  unsigned n;
  unsigned forks;  ///< g_forks when its run started
  Options env;     ///< the environment's options then (env_options)
  bool named;
  HostHook before;  ///< in a forked child: the hook restart_hook stands in for
};
std::atomic<unsigned> g_forks{0};
std::mutex g_opened_mu;
std::vector<Opened>* g_opened = nullptr;  // reachable at exit (no leak report), never freed

void restart_hook(lua_State* L, lua_Debug* ar);

void fork_prepare() {
  g_opened_mu.lock();
}
void fork_parent() {
  g_opened_mu.unlock();
}

// Each remembered state gets restart_hook on its next event, over the
// hook it has (the run left behind's, or the host's), kept in `before`;
// a state whose run has not started again since an earlier fork keeps
// the `before` it has.
void fork_child() {
  g_forks.fetch_add(1, std::memory_order_relaxed);
  g_opened_mu.unlock();
  if (!g_opened) return;
  for (Opened& o : *g_opened) {
    if (hook_api::gethook(o.L) == restart_hook) continue;
    o.before = {hook_api::gethook(o.L), hook_api::gethookmask(o.L), hook_api::gethookcount(o.L)};
    hook_api::sethook(o.L, restart_hook, LUA_MASKCALL | LUA_MASKCOUNT, 1);
  }
}

const void* registry_of(lua_State* L) {
  if (!lua_checkstack(L, 1)) return nullptr;
  lua_pushvalue(L, LUA_REGISTRYINDEX);
  const void* r = lua_topointer(L, -1);
  lua_pop(L, 1);
  return r;
}

void remember(lua_State* L, const char* host, unsigned n, const Options& env, bool named) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(fork_prepare, fork_parent, fork_child); });
  const void* reg = registry_of(L);
  const unsigned forks = g_forks.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_opened_mu);
  if (!g_opened) g_opened = new std::vector<Opened>;
  for (Opened& o : *g_opened)
    if (o.registry == reg) {
      o = Opened{L, reg, host, n, forks, env, named, {}};
      return;
    }
  g_opened->push_back(Opened{L, reg, host, n, forks, env, named, {}});
}

void forget(lua_State* L) {
  const void* reg = registry_of(L);
  std::lock_guard<std::mutex> lock(g_opened_mu);
  if (!g_opened) return;
  for (std::size_t i = 0; i < g_opened->size(); ++i)
    if ((*g_opened)[i].registry == reg) {
      (*g_opened)[i] = g_opened->back();
      g_opened->pop_back();
      return;
    }
}

int open_run(lua_State* L, const char* host, unsigned n, bool child, Options o, bool named);

// The state of co, when attach started its run before a fork this process
// came from and it has not started again here: taken (marked started).
bool take_forked(lua_State* co, Opened& out) {
  const unsigned forks = g_forks.load(std::memory_order_relaxed);
  if (forks == 0) return false;
  const void* reg = registry_of(co);
  std::lock_guard<std::mutex> lock(g_opened_mu);
  if (!g_opened) return false;
  for (Opened& o : *g_opened)
    if (o.registry == reg && o.forks != forks) {
      o.forks = forks;
      out = o;
      return true;
    }
  return false;
}

// In a forked child: co's state's run started again, when it waited, on
// the thread that runs it now; false when it did not start.
bool start_forked(lua_State* co) noexcept {
  Opened o{};
  bool again = false;
  const char* failed = cxx_guard([&] { again = take_forked(co, o); });
  if (failed || !again) return false;
  // The hook as it was at the fork, for open_run to take off and set again.
  if (hook_api::gethook(o.L) == restart_hook)
    hook_api::sethook(o.L, o.before.f, o.before.mask, o.before.count);
  return open_run(o.L, o.host.c_str(), o.n, true, o.env, o.named) == 0;
}

// The hook restart_hook stands in for on L's state (fork_child), or false.
bool before_fork(lua_State* L, HostHook*& h) {
  const void* reg = registry_of(L);
  if (!g_opened) return false;
  for (Opened& o : *g_opened)
    if (o.registry == reg) return h = &o.before, true;
  return false;
}

// The host's lua_sethook or lua_gethook* on a state restart_hook is on:
// they set or read the hook it stands in for (false: it is not on L).
bool forked_hook(lua_State* L, lua_Hook& f, int& mask, int& count, bool set) noexcept {
  if (g_forks.load(std::memory_order_relaxed) == 0 || hook_api::gethook(L) != restart_hook)
    return false;
  bool found = false;
  cxx_guard([&] {
    std::lock_guard<std::mutex> lock(g_opened_mu);
    HostHook* b = nullptr;
    if (!(found = before_fork(L, b))) return;
    if (set)
      *b = HostHook{f, mask, count};
    else
      f = b->f, mask = b->mask, count = b->count;
  });
  return found;
}

// A forked child's first event on a state attach started before the fork
// (fork_child set it): its run starts again here, and the event goes on to
// the hook set then (luaflame's, with the host's behind it, or the host's),
// so that the call that entered the state is counted, by both. When the
// run does not start, the hook of before the fork is set back.
// Contract: a lua_Hook, called by the VM on the thread that runs the state,
// its hooks off meanwhile. No C++ exception leaves it: start_forked and the
// lock's guard catch them, and the run starts under lua_pcall. The hook it
// hands the event to may raise a Lua error (a host's instruction limit),
// which unwinds through it: no C++ object is alive in its frame then, and
// it is not noexcept (LuaJIT's errors unwind as C++ exceptions do).
void restart_hook(lua_State* L, lua_Debug* ar) {
  if (!start_forked(L) && hook_api::gethook(L) == restart_hook) {
    HostHook h{};  // none when the state is not found: never left on
    forked_hook(L, h.f, h.mask, h.count, false);
    hook_api::sethook(L, h.f, h.mask, h.count);
  }
  const lua_Hook now = hook_api::gethook(L);
  bool call = ar->event == LUA_HOOKCALL;
#ifdef LUA_HOOKTAILCALL
  call = call || ar->event == LUA_HOOKTAILCALL;
#endif
  if (call && now && now != restart_hook && (hook_api::gethookmask(L) & LUA_MASKCALL)) now(L, ar);
}

}  // namespace

int open(lua_State* L, const char* host, unsigned n) LF_LUA_ENTRY {
  Options env;
  std::string err;
  bool ok = false, named = false;
  const char* failed = cxx_guard([&] { ok = env_options(env, named, err); });
  if (failed || !ok) {
    say(host, n, std::string("not profiled: ") + (failed ? failed : err.c_str()));
    return -1;
  }
  const int r = open_run(L, host, n, false, env, named);
  // When it throws, the run does not start again after a fork.
  if (r == 0) cxx_guard([&] { remember(L, host, n, env, named); });
  return r;
}

bool resume(lua_State* co, bool entering) noexcept {
  if (host_resume(co, entering)) return true;
  return entering && start_forked(co) && host_resume(co, true);
}

bool forked_sethook(lua_State* L, lua_Hook f, int mask, int count) noexcept {
  return forked_hook(L, f, mask, count, true);
}

bool forked_gethook(lua_State* L, lua_Hook& f, int& mask, int& count) noexcept {
  return forked_hook(L, f, mask, count, false);
}

namespace {

// The host's hook on L, taken off while its run starts, then set again as
// the host's lua_sethook sets it (chained behind luaflame's while tracing):
// the host's hook sees none of luaflame's own calls, and in a forked child
// it is the one the host had under the hook of the run left behind there
// (which would otherwise be kept as the host's, and the host's lost).
HostHook host_hook_off(lua_State* L) {
  HostHook h;
  if (!left_hook(L, h.f, h.mask, h.count))
    h = {hook_api::gethook(L), hook_api::gethookmask(L), hook_api::gethookcount(L)};
  hook_api::sethook(L, nullptr, 0, 0);
  return h;
}

// Starts L's run with the environment's options `o` and attach's: 0, or
// -1 said on stderr. Called where a Lua error may be raised (under
// lua_pcall only: nothing jumps over the callers' C++ objects).
int open_run(lua_State* L, const char* host, unsigned n, bool child, Options o, bool named) {
  std::string err;
  bool ok = false;
  const char* failed = cxx_guard([&] { ok = attach_options(host, n, child, named, o, err); });
  if (failed || !ok) {
    say(host, n, std::string("not profiled: ") + (failed ? failed : err.c_str()));
    return -1;
  }
  // The shim wraps the library's hook functions: the collector's own calls
  // go to the library itself (compat.hpp's hook_api), never back to it.
  if (!hook_api::resolve()) {
    say(host, n, "not profiled: the Lua library's own lua_sethook cannot be found");
    return -1;
  }
  adapter_setup();
  if (!lua_checkstack(L, 2)) {  // a host's call may have used its stack up
    say(host, n, "not profiled: no room on the state's stack");
    return -1;
  }
  const HostHook had = host_hook_off(L);
  lua_pushcfunction(L, run::start_session);
  lua_pushlightuserdata(L, &o);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    hook_api::sethook(L, had.f, had.mask, had.count);
    const char* msg = lua_tostring(L, -1);
    // Another state's run holds the process (LuaJIT): said once, not per state.
    const bool busy = msg && std::strstr(msg, "already running on another");
    if (!busy || !g_said_busy.exchange(true))
      say(host, n,
          std::string("not profiled: ") + (msg ? msg : "cannot start") +
              (busy ? "; LUAFLAME_ATTACH_STATE=N profiles the Nth state instead" : ""));
    lua_pop(L, 1);
    return -1;
  }
  if (had.f && !host_sethook(L, had.f, had.mask, had.count))
    hook_api::sethook(L, had.f, had.mask, had.count);
  g_quiet = o.quiet;
  g_report_at_exit = !o.quiet;  // a state never closed is reported at exit
  return 0;
}

}  // namespace

void close(lua_State* L) LF_LUA_ENTRY {
  cxx_guard([&] { forget(L); });
  run::end_session(L, g_quiet);
}

}  // namespace attach
}  // namespace lfc

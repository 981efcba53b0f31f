// `luaflame attach` (docs/attach.md): what the preloaded shim
// (collector/attach/shim.cpp, which knows no Lua header) finds in the
// luaflame.so of the Lua a host links. The shim looks the three functions up
// by these names with dlsym; a change of their meaning changes the version
// in the names, so an older shim finds none and says so.
//
//   int  luaflame_attach_open_v1(lua_State* L, const char* program, unsigned n)
//        after the host's luaL_openlibs(L) on the state numbered n (1, 2, ...)
//        of this process: starts its run from LUAFLAME_* (name PROGRAM#N,
//        tags program, pid, host); 0 when profiling, -1 when not (said on
//        stderr, the host goes on unprofiled).
//   void luaflame_attach_close_v1(lua_State* L)
//        before the host's lua_close(L): ends L's run when it has one.
//   int  luaflame_attach_resume_v1(lua_State* co, int entering)
//        around the host's own lua_resume(co, ...) (1 before, 0 after, the
//        latter only when the former returned 1): the profiled state's run
//        follows the coroutine as it follows coroutine.resume. In a child
//        forked after open, the state's run first starts again there, as
//        at any other first event of the state there (the shim needs
//        nothing more: docs/attach.md, "Forked workers").
//   int  luaflame_attach_sethook_v1(lua_State* L, lua_Hook f, int mask, int count)
//        instead of the host's own lua_sethook(L, f, mask, count) from C:
//        1 when it set it, where the sampler's signal cannot tear it
//        (HookChain::program_set); 0 when L's state has no run on this
//        thread (the shim calls the library's own then).
//   int  luaflame_attach_gethook_v1(lua_State* L, lua_Hook* f, int* mask, int* count)
//        instead of the host's own lua_gethook, lua_gethookmask and
//        lua_gethookcount: 1 with the program's hook on L (never the
//        one-shot armed over it, nor luaflame's own); 0 as above.
//   The library's own functions are the collector's (compat.hpp's
//   hook_api, resolved before the run starts): its calls never come back.
#pragma once

struct lua_State;
struct lua_Debug;

// The names, once: lua_entry.cpp defines them, the shim looks up their text.
#define LUAFLAME_ATTACH_OPEN luaflame_attach_open_v1
#define LUAFLAME_ATTACH_CLOSE luaflame_attach_close_v1
#define LUAFLAME_ATTACH_RESUME luaflame_attach_resume_v1
#define LUAFLAME_ATTACH_SETHOOK luaflame_attach_sethook_v1
#define LUAFLAME_ATTACH_GETHOOK luaflame_attach_gethook_v1
#define LUAFLAME_ATTACH_TEXT_(x) #x
#define LUAFLAME_ATTACH_TEXT(x) LUAFLAME_ATTACH_TEXT_(x)

using luaflame_attach_open_fn = int (*)(lua_State*, const char*, unsigned);
using luaflame_attach_close_fn = void (*)(lua_State*);
using luaflame_attach_resume_fn = int (*)(lua_State*, int);
using luaflame_attach_hook = void (*)(lua_State*, lua_Debug*);  // lua_Hook
using luaflame_attach_sethook_fn = int (*)(lua_State*, luaflame_attach_hook, int, int);
using luaflame_attach_gethook_fn = int (*)(lua_State*, luaflame_attach_hook*, int*, int*);

#ifndef LUAFLAME_ATTACH_SHIM
#include "vm/lua/boundary.hpp"

namespace lfc::attach {
int open(lua_State* L, const char* program, unsigned n) LF_LUA_ENTRY;
void close(lua_State* L) LF_LUA_ENTRY;
/// The shim's resume: host_resume, and in a forked child the run of co's
/// state started again first when attach started it before the fork.
bool resume(lua_State* co, bool entering) noexcept;
/// The host's own lua_sethook / lua_gethook* on L from C in a forked child,
/// before L's run starts again there: the hook of before the fork, which
/// the hook that starts it stands in for; false when that hook is not on L.
bool forked_sethook(lua_State* L, luaflame_attach_hook f, int mask, int count) noexcept;
bool forked_gethook(lua_State* L, luaflame_attach_hook& f, int& mask, int& count) noexcept;
/// The adapter's: the host resumes co (entering) or co is back; true when
/// the run followed it (then the return is told too).
bool host_resume(lua_State* co, bool entering) noexcept;
/// The adapter's: the host's own lua_sethook / lua_gethook* on L from C;
/// false when the adapter leaves it to the library (no run of L's state on
/// this thread).
bool host_sethook(lua_State* L, luaflame_attach_hook f, int mask, int count) noexcept;
bool host_gethook(lua_State* L, luaflame_attach_hook& f, int& mask, int& count) noexcept;
/// The adapter's: luaflame's own hook is on L with no run of L's state here
/// (one left behind in a forked child): true, with the hook the host had
/// under it.
bool left_hook(lua_State* L, luaflame_attach_hook& f, int& mask, int& count) noexcept;
/// The adapter's: set up what an attached host needs before its first run.
void adapter_setup() noexcept;
}  // namespace lfc::attach
#endif

// chunk_locals.hpp: the main chunk's locals where it returned, read from
// the registers and the CallInfo it left behind.
#include "vm/puc/chunk_locals.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "vm/puc/luaint.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::chunk_locals {

namespace {

using luaint::at;

using luaint::kLocVarEnd;
using luaint::kLocVarSize;
using luaint::kLocVarStart;
using luaint::kProtoLocvars;
using luaint::kProtoSizelocvars;
using luaint::kStateTop;
using luaint::kTValueSize;
constexpr std::size_t kCiFunc = 0;  ///< CallInfo.func (5.2+: luaint's func_of reads it too)
/// Where a vararg chunk's registers start, past its function's slot and its
/// arguments: 5.4 also copies the function up (luaT_adjustvarargs).
constexpr int kBasePastArgs = LUA_VERSION_NUM >= 504 ? 2 : 1;

bool g_checked = false;  // set by probe(), on the Lua thread before the program runs

/// The raw address of stack index `idx` (absolute, of the running C
/// function), above the top too: from lua_State.top and lua_gettop.
char* slot(lua_State* L, int idx) {
  char* top = at<char*>(L, kStateTop);
  return top + static_cast<std::ptrdiff_t>(idx - lua_gettop(L) - 1) *
                   static_cast<std::ptrdiff_t>(kTValueSize);
}

/// The locals active at `pc` (luaF_getlocalname's rule): they hold the
/// first registers, in order. `ending`: those whose scope ends at `pc`
/// count too (5.1's final RETURN, which close_func emits after ending the
/// locals still open).
int active_locals(const void* proto, int pc, bool ending = false) {
  const int size = at<int>(proto, kProtoSizelocvars);
  const char* vars = at<const char*>(proto, kProtoLocvars);
  int count = 0;
  for (int i = 0; i < size; ++i) {
    const char* v = vars + static_cast<std::size_t>(i) * kLocVarSize;
    if (at<int>(v, kLocVarStart) > pc) break;
    const int end = at<int>(v, kLocVarEnd);
    if (pc < end || (ending && pc == end)) ++count;
  }
  return count;
}

#if LUA_VERSION_NUM >= 502

/// The pc of the instruction the chunk returned by, read from the CallInfo
/// after the running one (the chunk's, free now); -1 when that CallInfo
/// does not run the chunk from its slot (a Lua tail call replaced it).
int return_pc(lua_State* L, const Call& call, const void* proto) {
  const void* dead = at<const void*>(luaint::state_ci(L), luaint::kCiNext);
  const char* func = slot(L, call.func_idx);
  if (!dead || at<const char*>(dead, kCiFunc) != func || at<const void*>(func, 0) != call.closure)
    return -1;
  const char* code = at<const char*>(proto, luaint::kProtoCode);
  const char* saved = at<const char*>(dead, luaint::kCiSavedpc);
  const int sizecode = at<int>(proto, luaint::kProtoSizecode);
  if (saved <= code || saved > code + 4 * static_cast<std::size_t>(sizecode)) return -1;
  return static_cast<int>((saved - code) / 4) - 1;  // savedpc is past the instruction
}

/// The locals in scope where the chunk returned; -1 when it did not return
/// from its own frame.
int locals_at_return(lua_State* L, const Call& call, const void* proto, bool& fewest) {
  fewest = false;
  const int pc = return_pc(L, call, proto);
  return pc < 0 ? -1 : active_locals(proto, pc);
}
#else
// Lua 5.1 keeps no pc for a returned frame (luaD_poscall restores
// L->savedpc from the caller, and a frame's CallInfo.savedpc is written
// only when it calls). Its CallInfo is still the array's next one, so the
// frame is known; which RETURN it took is not. The locals in scope at every
// RETURN of the chunk are the first registers in each case: the fewest of
// them are locals wherever it returned (locals declared after an early
// top-level `return` are then left out, never a dead register counted).
int locals_at_return(lua_State* L, const Call& call, const void* proto, bool& fewest) {
  const char* dead = at<const char*>(L, luaint::kState51Ci) + luaint::kCi51Size;
  const char* func = slot(L, call.func_idx);
  if (at<const char*>(dead, luaint::kCi51Func) != func || at<const void*>(func, 0) != call.closure)
    return -1;
  const char* code = at<const char*>(proto, luaint::kProtoCode);
  const int last = at<int>(proto, luaint::kProtoSizecode) - 1;
  int least = -1, most = -1;
  for (int pc = 0; pc <= last; ++pc) {
    const uint32_t ins = at<uint32_t>(code, 4 * static_cast<std::size_t>(pc));
    if (luaint::op51(ins) == luaint::kOp51SetList && luaint::arg51_c(ins) == 0) ++pc;  // a count
    if (luaint::op51(ins) != luaint::kOp51Return) continue;
    const int n = active_locals(proto, pc, pc == last);  // the final RETURN: see active_locals
    least = least < 0 || n < least ? n : least;
    most = n > most ? n : most;
  }
  fewest = least != most;
  return least;
}
#endif

int new_table(lua_State* L) noexcept {
  lua_createtable(L, static_cast<int>(lua_tointeger(L, 1)), 0);
  return 1;
}

/// Raises the top over the registers [base, base + n), copies them into a
/// table at `top + 1` and puts the top there. The only allocation (the
/// table) is under lua_pcall, after the raise: a collection it steps marks
/// the registers, and a memory error leaves nothing behind.
bool copy_registers(lua_State* L, int top, int base, int n) {
  const int last = base + n - 1;
  if (base <= top || !lua_checkstack(L, last - top + LUA_MINSTACK)) return false;
  char* raised = slot(L, last + 1);  // after lua_checkstack, which may move the stack
  std::memcpy(reinterpret_cast<char*>(L) + kStateTop, &raised, sizeof raised);
  lua_pushcfunction(L, new_table);
  lua_pushinteger(L, n);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lua_settop(L, top);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    lua_pushvalue(L, base + i);
    lua_rawseti(L, -2, i + 1);  // in the array part lua_createtable made: no allocation
  }
  lua_replace(L, top + 1);
  lua_settop(L, top + 1);
  return true;
}

}  // namespace

bool push(lua_State* L, const Call& call, bool* fewest) {
  if (!g_checked) return false;
  const void* proto = at<const void*>(call.closure, luaint::kClosureFn);
  bool least = false;
  const int n = locals_at_return(L, call, proto, least);
  if (n < 0) return false;
  if (fewest) *fewest = least;
  return copy_registers(L, lua_gettop(L), call.func_idx + call.nargs + kBasePastArgs, n);
}

namespace {

// One known chunk: run on T with two light userdata arguments, then push();
// `want` lists the locals' values by argument (1 or 2), "" for none kept.
bool check_chunk(lua_State* T, const char* code, const char* want) {
  static char a1, a2;
  lua_settop(T, 0);
  if (luaL_loadbuffer(T, code, std::strlen(code), "=luaflame.probe") != LUA_OK) return false;
  const Call call{1, 2, lua_topointer(T, 1)};
  lua_pushlightuserdata(T, &a1);
  lua_pushlightuserdata(T, &a2);
  if (lua_pcall(T, 2, 0, 0) != LUA_OK) return false;
  const bool kept = push(T, call);
  if (!kept) return *want == '\0';
  const int n = static_cast<int>(std::strlen(want));
  bool same = lua_gettop(T) == 1 && static_cast<int>(lua_rawlen(T, 1)) == n;
  for (int i = 0; same && i < n; ++i) {
    lua_rawgeti(T, 1, i + 1);
    same = lua_touserdata(T, -1) == (want[i] == '1' ? &a1 : &a2);
    lua_pop(T, 1);
  }
  return same;
}

}  // namespace

const char* probe(lua_State* L) {
  lua_State* T = lua_newthread(L);
  lua_sethook(T, nullptr, 0, 0);
  g_checked = true;  // for check_chunk's push() calls
  const bool ok =
      check_chunk(T, "local a, b = ... local c = a do local d = b end local e = b", "1212") &&
      check_chunk(T, "local a = ... if a then return end local b = a", "1") &&
      check_chunk(T, "local a, b = ... local function f() return 1 end return f()", "") &&
      check_chunk(T, "local a, b = ... return select('#', b)", "12");
  g_checked = ok;
  lua_settop(T, 0);
  lua_pop(L, 1);
  return ok ? nullptr : "the registers a chunk left did not hold its locals";
}

}  // namespace lfc::chunk_locals

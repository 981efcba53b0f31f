// The values a script's main chunk held in its locals where it returned,
// for `luaflame run`'s leak graph (alloc mode).
//
// Live bytes are what survives two full collections at stop. Under
// `luaflame run` the stop comes after the main chunk returned, when its
// locals are dead: a script's `local cache = {}` held everything and showed
// nothing. The runner calls the chunk with lua_pcall(L, n, 0) from its own C
// function, so nothing has run on L between the chunk's OP_RETURN and
// push(): its registers still hold their values in the stack above the top,
// and its CallInfo is the free one after the runner's (CallInfo.next), with
// the pc it returned at. push() raises lua_State.top over those registers,
// copies the locals active at that pc (Proto.locvars) into a table, and puts
// the top back: the stop's collections then see them live.
//
// Why reading the dead slots is memory-safe: a collection's atomic phase
// sets every slot above the top to nil before the sweep frees anything
// (traversethread), and nothing can allocate, so no collection can step,
// between the return and push(). A slot above the top thus holds nil or an
// object that was reachable at the last atomic phase or made since: never
// a freed one.
//
// The offsets it reads are luaint.hpp's (its table: lua_State.top,
// CallInfo.next, Proto.locvars and sizelocvars, LocVar), checked by probe()
// on known chunks run on a thread of their own.
// Lua 5.1 keeps no return pc (luaD_poscall restores L->savedpc from the
// caller): there the locals kept are those in scope at every RETURN of the
// chunk, the fewest (`fewest` says when that left some out). A local of a
// block that ends the chunk (`do local t = f() end` as its last statement)
// counts there as the chunk's: 5.1's final RETURN follows the block's end
// with no instruction between.
#pragma once

extern "C" {
#include <lua.h>
}

namespace lfc::chunk_locals {

/// A main chunk as the runner called it: the stack index it had when
/// lua_pcall(L, nargs, 0, ...) was made and its closure (lua_topointer).
struct Call {
  int func_idx;
  int nargs;
  const void* closure;
};

/// Right after that lua_pcall returned LUA_OK, and before anything else ran
/// on L: pushes a table of the values the chunk's locals held where it
/// returned and gives true; false and nothing pushed when the CallInfo
/// left behind is not the chunk's (it tail-called, or the layout was not
/// checked). `fewest` (when not null) is set when the chunk returns at
/// several places with different locals in scope and only those in scope
/// at all of them were kept (5.1). May raise a memory error (lua_createtable).
bool push(lua_State* L, const Call& call, bool* fewest = nullptr);

/// Checks the reads on known chunks: null, or why push() must not be used
/// (a static string). Runs Lua code on a thread of its own (no program hook
/// sees it), before the program's first code; may raise a memory error
/// (lua_newthread), over no C++ object.
const char* probe(lua_State* L);

}  // namespace lfc::chunk_locals

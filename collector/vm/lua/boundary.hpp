// The C boundary (docs/collector.md, "Boundaries"): Lua is C, so neither a
// C++ exception nor a Lua error (longjmp) may cross a frame that does not
// expect it. Every C entry point of the collector (hooks, the allocator,
// signal handlers, lua_CFunctions, thread functions) is noexcept; the C++
// it runs that may throw (allocations: strings, maps, the session) runs
// inside cxx_guard, which catches everything and says what in a static
// message. A Lua call that may raise runs only where no C++ object with a
// destructor is live in the frame, or under lua_pcall.
//
// LuaJIT differs: on x64 it raises a Lua error as a C++-compatible unwind
// (its own exception class), which runs our destructors, must pass through
// our frames (a noexcept frame would std::terminate the program) and must
// not be caught by catch (...). So in the LuaJIT build (LUAFLAME_LUAJIT)
// the functions through which a Lua error may pass are declared
// LF_LUA_ENTRY, not noexcept, and cxx_guard catches C++'s own exceptions
// (std::exception) only.
#pragma once

#include <exception>
#include <new>

#ifdef LUAFLAME_LUAJIT
#define LF_LUA_ENTRY
#else
#define LF_LUA_ENTRY noexcept
#endif

namespace lfc {

/// Runs `f`; nullptr when it returned, else a static message naming what it
/// threw ("out of memory" or "internal error"). Throws nothing of its own;
/// under LuaJIT a Lua error raised inside passes through.
template <class F>
const char* cxx_guard(F&& f) LF_LUA_ENTRY {
  try {
    f();
    return nullptr;
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception&) {
    return "internal error";
  }
#ifndef LUAFLAME_LUAJIT
  catch (...) {
    return "internal error";
  }
#endif
}

}  // namespace lfc

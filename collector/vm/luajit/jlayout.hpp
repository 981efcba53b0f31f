// The internals of LuaJIT 2.1 that the collector reads directly, in one
// place (as luaint.hpp is PUC-Rio Lua's): what names the function a trace
// hook event is about without lua_getinfo (a debug-info walk and a string
// copy per call: docs/luajit.md, "Trace mode").
//
// The offsets are those of lj_obj.h in LuaJIT 2.1 with LJ_GC64 (the only
// mode of the x64 builds Debian ships; LuaJIT/LuaJIT and openresty/luajit2
// agree), LP64:
//   lua_State.base           32  (TValue*: checked against .stack first)
//   lua_State.stack          56  (MRef: TValue*)
//   a frame's function        the TValue below its link slot (LJ_FR2)
//   TValue -> GCobj*          low 47 bits (LJ_GCVMASK)
//   GCfunc.ffid              10  (0 a Lua function, 1 a C function, more a fast function)
//   GCfunc.pc                32  (MRef: a Lua function's first instruction)
//   sizeof(GCproto)         104  (the bytecode follows it)
//   GCproto.chunkname        64  (GCRef: GCstr*)
//   GCproto.firstline        72  (numline at 76)
//   a frame link (lj_frame.h) type bits 0-2: 0 called from Lua (then the
//                            caller's PC, the caller 2 + bc_a(PC[-1]) slots
//                            below), 3 a vararg pseudo-frame, else the
//                            distance in bytes to the frame below
// probe() checks every one of them at start against lua_getinfo on real
// call events; when one does not hold, nothing here is read (the tracer
// names each call through lua_getinfo, as before) and the summary says why.
//
// The sampler reads two more, to tell the host's own C code from Lua's
// (outside_lua):
//   lua_State.glref          16  (MRef: global_State*; its first two words
//                                 are lua_getallocf's allocf and ud)
//   lua_State.cframe         80  (void*: null while the thread runs no call
//                                 from C; lj_vm's call, pcall and resume
//                                 entries set it, their returns put back
//                                 the caller's)
//   global_State.cur_L       searched (GCRef: the thread that last entered
//                                 the VM; its offset moved between 2.1
//                                 snapshots as fields were added before it)
// probe_host() finds and checks them on threads it resumes; when they do
// not hold, the sampler reads neither and the summary says why. And one
// to tell a __gc finalizer (in_finalizer):
//   global_State.hookmask    searched (uint8_t: lua_sethook's mask in bits
//                                 0-3; HOOK_GC, 0x40, set by gc_call_finalizer
//                                 around each finalizer, lj_obj.h)
//
// Contract: hook_func is called only inside a hook of L, on L's thread,
// after probe() said ok: the frame it reads is L's running one, which the
// hook keeps alive; it only loads.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

extern "C" {
#include <lua.h>
}

namespace lfc::jit::layout {

constexpr std::size_t kStateStack = 56;
constexpr std::size_t kStateGlref = 16, kStateCframe = 80;
constexpr std::size_t kStateBase = 32;  ///< lua_State.base (probe() only)
constexpr std::size_t kFuncFfid = 10, kFuncPc = 32;
constexpr std::size_t kProtoSize = 104, kProtoChunkname = 64, kProtoFirstline = 72,
                      kProtoNumline = 76;
constexpr std::uint64_t kGcvMask = (std::uint64_t{1} << 47) - 1;
/// lj_frame.h: a frame link's type bits (FRAME_TYPE, FRAME_TYPEP) and types.
constexpr std::uint64_t kFrameType = 3, kFrameTypeP = 7, kFrameLua = 0, kFrameVarg = 3;

template <class T>
T at(const void* base, std::size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof v);
  return v;
}

/// The function object (GCfunc*) of the frame a hook event of L is about:
/// lua_Debug.i_ci is that frame's link slot on L's stack (lj_dispatch.c's
/// callhook), its function the slot below.
inline const void* hook_func(const lua_State* L, const lua_Debug& ar) {
  const char* stack = at<const char*>(L, kStateStack);
  const auto tv = at<std::uint64_t>(stack, (static_cast<std::size_t>(ar.i_ci) - 1) * 8);
  return reinterpret_cast<const void*>(tv & kGcvMask);  // NOLINT(performance-no-int-to-ptr)
}

/// The slot of the frame that called the one at `slot` (a hook's i_ci), as
/// lua_getstack(L, 1) gives it, or -1: lj_debug_frame's walk, one level. A
/// frame's link slot holds, for a frame called from Lua, the caller's PC
/// (type bits 0; the caller's frame lies 2 + the A operand of the calling
/// instruction below), else a type and the distance in bytes to the frame
/// below (a vararg function's pseudo-frame and the dummy frames of
/// lj_err_optype_call are not levels).
inline std::int64_t caller_slot(const lua_State* L, std::int64_t slot) {
  const char* stack = at<const char*>(L, kStateStack);
  auto word = [stack](std::int64_t i) {
    return at<std::uint64_t>(stack, static_cast<std::size_t>(i) * 8);
  };
  const auto self = reinterpret_cast<std::uintptr_t>(L);
  int level = 1;
  for (std::int64_t f = slot; f > 1;) {
    if ((word(f - 1) & kGcvMask) == self) ++level;  // a dummy frame
    if (level-- == 0) return f;
    const std::uint64_t ftsz = word(f);
    if ((ftsz & kFrameType) == kFrameLua) {
      const auto* pc =
          reinterpret_cast<const std::uint32_t*>(ftsz);  // NOLINT(performance-no-int-to-ptr)
      f -= 2 + ((pc[-1] >> 8) & 0xff);
    } else {
      if ((ftsz & kFrameTypeP) == kFrameVarg) ++level;
      f -= static_cast<std::int64_t>((ftsz & ~kFrameTypeP) / 8);
    }
  }
  return -1;
}

/// A function object is one of LuaJIT's built-ins (a fast function: its
/// ffid above FF_C), not a Lua function or a C function a host registered.
inline bool is_fast_function(const void* fn) {
  return fn && at<std::uint8_t>(fn, kFuncFfid) > 1;
}

/// What names a function: a Lua function by its bytecode (one per
/// prototype), with its chunk name and first line (a prototype freed and
/// another made at the same place is told apart by them, or is the same
/// frame: the frame table keys Lua functions by source and line); any
/// other function by its object, as JFrames keys C functions.
struct Ident {
  const void* key;
  const void* chunk;  ///< GCstr* of the chunk name (Lua functions), else null
  int line;           ///< first line (Lua functions), else 0
};
inline Ident ident_of(const void* fn) {
  if (at<std::uint8_t>(fn, kFuncFfid) != 0) return {fn, nullptr, 0};
  const char* pc = at<const char*>(fn, kFuncPc);
  const char* proto = pc - kProtoSize;
  return {pc, at<const void*>(proto, kProtoChunkname), at<int>(proto, kProtoFirstline)};
}

/// Where a state's running thread is found: its global_State and the
/// offset of cur_L in it (probe_host).
struct HostWatch {
  const void* g = nullptr;
  std::size_t cur_l = 0;     ///< 0: not found
  std::size_t hookmask = 0;  ///< global_State.hookmask's offset, 0: not found
};
constexpr std::uint8_t kHookGc = 0x40;

/// A __gc finalizer runs: LuaJIT's profiler sets no hook there (its handler
/// counts the signal for a callback that may never come: lost at stop) and
/// no debug hook fires. Contract: from the SIGPROF handler on the state's
/// thread, after probe_host found the offset: one byte load of what that
/// thread writes.
inline bool in_finalizer(const HostWatch& w) {
  return (at<std::uint8_t>(w.g, w.hookmask) & kHookGc) != 0;
}

/// No Lua runs: the thread that last entered the VM is none, or is inside
/// no call from C (its cframe null), so the CPU is in the host's own C
/// code between its calls into Lua (nginx's event loop, a scanner's C).
/// Contract: called from the SIGPROF handler on the thread that runs the
/// state, after probe_host said ok: two aligned word loads of what that
/// thread writes, which the signal sees in program order. LuaJIT nulls
/// cur_L before it frees the thread named (lj_state_free), so a non-null
/// one is alive. A C function called from Lua that itself resumes another
/// thread (lua_resume, which leaves cur_L on the resumed thread) reads as
/// outside Lua from then until it returns (BC_FUNCC names its caller's
/// thread again).
inline bool outside_lua(const HostWatch& w) {
  const void* cur = at<const void*>(w.g, w.cur_l);
  return !cur || !at<const void*>(cur, kStateCframe);
}

/// Whether the reads of outside_lua hold (w filled), or why not: resumes
/// two threads of its own from C, each running a C function that looks for
/// itself in global_State; then enters the VM on L (lua_cpcall), so that
/// cur_L names L again. And global_State.hookmask (w.hookmask, 0 when not
/// found, with `gc_why`): the one byte of global_State that follows three
/// lua_sethook masks. Not from a hook.
bool probe_host(lua_State* L, HostWatch& w, std::string& why, std::string& gc_why);

/// Whether the reads above hold on this LuaJIT (and why not). Runs a chunk
/// on a thread of its own under a call hook; L's hooks are untouched. Not
/// from a hook.
bool probe(lua_State* L, std::string& why);

}  // namespace lfc::jit::layout

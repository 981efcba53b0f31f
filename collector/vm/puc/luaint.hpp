// The internals of PUC-Rio Lua 5.1, 5.2, 5.3 and 5.4 that the collector
// reads directly, in one place, per release.
//
// The public API cannot tell the signal handler where the thread is (no
// API function is async-signal-safe to call there but lua_sethook), nor
// walk a long stack in O(depth): for these two the collector reads
// lua_State.ci and CallInfo.previous itself; and the tracer names a called
// function by its Proto or C function, read through the CallInfo (the call
// cache of tracer.cpp), not by lua_getinfo and a string hash. Every layout
// read here is checked once at start by probe() against what the API says
// on a real stack; a read whose check failed is never used (its caller
// falls back to the API, slower or less exact, and the summary says why).
//
// The offsets below are those of each release's lstate.h, lobject.h and
// lopcodes.h on an LP64 ABI (5.1.5, 5.2.3/5.2.4, 5.3.6, 5.4.0-5.4.6), read
// from the headers in Lua's own repository (docs/collector.md, "Every Lua"):
//                            5.1    5.2    5.3    5.4
//   lua_State.ci              40     32     32     32
//   lua_State.base_ci         80      -      -      -  (5.1: an array of CallInfos)
//   lua_State.stack_last       -     48     48     40
//   lua_State.stack            -     56     56     48
//   lua_State.allowhook      101     73    204     11
//   lua_State.status          10     10     12     10
//   lua_State.stacksize        -     64    184      -  (foreign.cpp: stack_settled)
//   CallInfo.callstatus        -     34     66     62  (a byte on 5.2, a short after)
//   CIST_HOOKED, CIST_FIN      -   0x2,-  0x4,0x100 0x8,0x80
//   CallInfo (size)           40      -      -      -
//   CallInfo.func              8      0      0      0
//   CallInfo.previous          -     16     16     16
//   CallInfo.u.l.savedpc      24     56     40     32
//   TValue tag                 8      8      8      8  (5.1: an int, 6 for any function)
//   Closure.isC               10      -      -      -
//   LClosure.p / CClosure.f   32     24     24     24
//   Proto.sizecode            80     88     24     24
//   Proto.linedefined         96    104     40     44  (lastlinedefined at +4)
//   Proto.code                24     24     56     64
//   Proto.source              64     72    104    112
//   TString contents          24     24     24     24  (getstr)
//   TString length             -     16  11/16  11/16  (5.2: len, any string; after:
//                                                        shrlen, a byte / u.lnglen)
//   OP_TAILCALL               29      -      -      -  (an instruction's low 6 bits)
//   OP_RETURN, OP_SETLIST     30, 34   -      -      -  (chunk_locals.cpp; SETLIST's C
//                                                         at bit 14, 9 bits: 0, a count follows)
//   lua_State.top             16     16     16     16  (chunk_locals.cpp)
//   CallInfo.next              -     24     24     24  (chunk_locals.cpp)
//   Proto.sizelocvars         92    100     36     36  (chunk_locals.cpp)
//   Proto.locvars             48     48     80    104  (chunk_locals.cpp)
//   LocVar (size 16)          startpc 8, endpc 12       (chunk_locals.cpp)
// The tags of a Lua closure, a light C function and a C closure are the
// same in 5.2 to 5.4 (0x46, 0x16, 0x66); 5.1 has one tag for functions and
// Closure.isC (func_of gives the later tags). CallInfo.callstatus's
// CIST_HOOKED and CIST_FIN move from release to release (5.2 has no
// CIST_FIN: its finalizers carry no mark) and 5.1 has neither. Lua 5.1 keeps its
// CallInfos in an array and its lua_Debug names them by index: the walks
// use the API there; the tracer reads the called function and what tells a
// tail call (tail_call51). The allocator reads 5.4.4's global_State GC
// flags (MirrorGlobal below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

extern "C" {
#include <lua.h>
}

namespace lfc::luaint {

/// The release whose offsets this build uses: 0 on 5.1 (no direct reads).
constexpr int kRelease = LUA_VERSION_NUM >= 502 && LUA_VERSION_NUM <= 504 ? LUA_VERSION_NUM : 0;
/// Per-release offsets (the table above), indexed 5.2, 5.3, 5.4.
constexpr std::size_t pick(std::size_t v52, std::size_t v53, std::size_t v54) {
  return kRelease == 502 ? v52 : kRelease == 503 ? v53 : v54;
}
/// CallInfo.callstatus is read on 5.2 to 5.4 (5.1 has none).
constexpr bool kHasCallstatus = kRelease != 0;

constexpr std::size_t kStateCi = 4 * sizeof(void*);     ///< lua_State.ci
constexpr std::size_t kCiPrevious = 2 * sizeof(void*);  ///< CallInfo.previous

/// lua_Debug.i_ci as a CallInfo pointer (an array index on 5.1: null).
inline const void* ci_of(const lua_Debug& ar) {
#if LUA_VERSION_NUM >= 502
  return ar.i_ci;
#else
  (void)ar;
  return nullptr;
#endif
}
/// Points lua_Debug at a CallInfo, for lua_getinfo (not on 5.1).
inline void set_ci(lua_Debug& ar, const void* ci) {
#if LUA_VERSION_NUM >= 502
  ar.i_ci = static_cast<struct CallInfo*>(const_cast<void*>(ci));
#else
  (void)ar, (void)ci;
#endif
}

/// The CallInfo below `ci` (null below the base CallInfo).
inline const void* ci_prev(const void* ci) {
  const void* p;
  std::memcpy(&p, static_cast<const char*>(ci) + kCiPrevious, sizeof p);
  return p;
}

/// The tracer's key of the frame `ar` names (a hook's lua_Debug, or
/// lua_getstack's): its CallInfo on 5.2+ (used when ci_prev_ok); on 5.1 its
/// index in the CallInfo array, plus one, as a pointer: never null, never
/// dereferenced, and stable when the array grows and moves. A key is only
/// compared, and key_below gives its caller's.
inline const void* frame_key(const lua_Debug& ar) {
#if LUA_VERSION_NUM >= 502
  return ar.i_ci;
#else
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a key, compared and never dereferenced
  return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(ar.i_ci) + 1);
#endif
}
inline const void* key_below(const void* key) {
#if LUA_VERSION_NUM >= 502
  return ci_prev(key);
#else
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a key, compared and never dereferenced
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(key) - 1);
#endif
}
/// Where a tail-called Lua function runs, from the key its call event
/// names: 5.4 reuses the caller's CallInfo before the hook (the same key);
/// 5.1 to 5.3 call the hook on a CallInfo of its own and then move the
/// frame down onto the caller's (lvm.c, OP_TAILCALL): the key below.
inline const void* tail_key(const void* key) {
  return kRelease == 504 ? key : key_below(key);
}

/// The CallInfo `L` runs now. One aligned pointer load, no call: safe in a
/// signal handler that interrupted L's own thread (the value is the old or
/// the new CallInfo, both of which stay allocated until a GC shrinks the
/// list, and the handler does not dereference it).
inline const void* state_ci(const lua_State* L) {
  const void* ci;
  std::memcpy(&ci, reinterpret_cast<const char*>(L) + kStateCi, sizeof ci);
  return ci;
}

/// lua_State.hookcount (the instructions left before the count hook fires)
/// at byte offset `off`, found by probe(). lua_sethook resets it to the
/// base count; the collector puts it back after arming so that a program's
/// count hook (an instruction-limit sandbox, a coverage tool) still fires
/// at its count. Plain int load/store: safe from the handler on L's thread.
inline int hookcount(const lua_State* L, std::size_t off) {
  int v;
  std::memcpy(&v, reinterpret_cast<const char*>(L) + off, sizeof v);
  return v;
}
inline void set_hookcount(lua_State* L, std::size_t off, int v) {
  std::memcpy(reinterpret_cast<char*>(L) + off, &v, sizeof v);
}

/// How 5.1's and 5.2's luaV_execute count an instruction: they decrement
/// hookcount, then call traceexec, which fires the count event when it
/// reads 0; Debian's builds do the decrement as a load, a subtraction and
/// a store (5.3's and 5.4's luaG_traceexec, one `subl` on memory, which a
/// signal cannot split). So there a signal may come between the load and
/// the store: the count the handler sets is overwritten by the old one
/// less one. The handler then keeps a counting thread's count running
/// (HookChain::count_progress_unsure), which that store cannot corrupt
/// (before: tests/attach/hook_host.c on 5.1 and 5.2 at 4 kHz lost 2-11
/// of 53,540 count events, a call's events hundreds of instructions off);
/// and a 0 it reads there is a count event about to fire: kept 0, it fires
/// on time, to the one-shot, which forwards it (5.3, 5.4: counted as 1).
constexpr bool kCountStoreRaces = kRelease == 0 || kRelease == 502;
constexpr int kCountLeftAtZero = kCountStoreRaces ? 0 : 1;

/// lua_State.l_G, the state's global_State: what tells the states of a
/// process apart (sessions.hpp keys its table by it). After CommonHeader,
/// status (and nci, allowhook) and top: 24 on 5.2-5.4; 5.1 keeps `base`
/// before it: 32. global_State begins with frealloc and ud on 5.2-5.4; 5.1
/// puts its string table (16 bytes) first. probe() checks both against
/// lua_getallocf (Layout::global_ok). One aligned pointer load: safe from
/// any thread while the state lives.
constexpr std::size_t kStateGlobal = LUA_VERSION_NUM == 501 ? 32 : 24;
constexpr std::size_t kGlobalFrealloc = LUA_VERSION_NUM == 501 ? 16 : 0;
inline const void* global_of(const lua_State* L) {
  const void* g;
  std::memcpy(&g, reinterpret_cast<const char*>(L) + kStateGlobal, sizeof g);
  return g;
}

/// Lua 5.1's CallInfo array (lstate.h, lobject.h and lopcodes.h of 5.1.5,
/// LP64), read to tell a tail call, which 5.1 reports as a plain call:
/// lua_State.ci and base_ci, CallInfo (40 bytes) .func and .savedpc, TValue's
/// tag, Closure.isC, and OP_TAILCALL, the opcode in an instruction's low 6
/// bits. Checked by probe() against lua_getstack on a real stack and on
/// known calls (Layout::tail51_ok).
constexpr std::size_t kState51Ci = 40, kState51BaseCi = 80;
constexpr std::size_t kCi51Size = 40, kCi51Func = 8, kCi51Savedpc = 24;
constexpr std::size_t kTValue51Tag = 8, kClosure51IsC = 10;
constexpr unsigned kOp51TailCall = 29;
/// 5.1's OP_RETURN and OP_SETLIST, and SETLIST's C operand (lopcodes.h:
/// POS_C 14, SIZE_C 9; a C of 0 puts the count in the next word, not an
/// instruction). chunk_locals.cpp finds a chunk's RETURNs with them.
constexpr unsigned kOp51Return = 30, kOp51SetList = 34;
inline unsigned op51(std::uint32_t ins) {
  return ins & 0x3f;
}
inline unsigned arg51_c(std::uint32_t ins) {
  return (ins >> 14) & 0x1ff;
}

/// In a call hook on 5.1: the function being called is a Lua function that
/// the caller, a Lua function too, calls by OP_TAILCALL (its frame then
/// replaces the caller's). Loads only, through the CallInfos of L's running
/// call and its caller, which the hook's L keeps alive.
bool tail_call51(const lua_State* L);

// ---- the called function's identity (tracer.cpp's call cache) ----
constexpr unsigned char kTagLuaClosure = 0x06 | 0x40;  ///< LUA_VLCL | BIT_ISCOLLECTABLE
constexpr unsigned char kTagLightC = 0x16;             ///< LUA_VLCF
constexpr unsigned char kTagCClosure = 0x26 | 0x40;    ///< LUA_VCCL | BIT_ISCOLLECTABLE
/// The identity fields, with 5.1's (the table above).
constexpr std::size_t pick51(std::size_t v51, std::size_t v52, std::size_t v53, std::size_t v54) {
  return kRelease == 0 ? v51 : pick(v52, v53, v54);
}
constexpr std::size_t kClosureFn = pick51(32, 24, 24, 24);      ///< LClosure.p / CClosure.f
constexpr std::size_t kCiSavedpc = pick(56, 40, 32);            ///< CallInfo.u.l.savedpc (5.2+)
constexpr std::size_t kProtoSizecode = pick51(80, 88, 24, 24);  ///< Proto.sizecode
constexpr std::size_t kProtoLine =
    pick51(96, 104, 40, 44);  ///< Proto.linedefined, lastlinedefined at +4
constexpr std::size_t kProtoCode = pick51(24, 24, 56, 64);      ///< Proto.code
constexpr std::size_t kProtoSource = pick51(64, 72, 104, 112);  ///< Proto.source
constexpr std::size_t kTStringContents = 24;                    ///< TString.contents

// ---- a returned chunk's registers and locals (chunk_locals.cpp, checked by its probe) ----
constexpr std::size_t kStateTop = 2 * sizeof(void*);  ///< lua_State.top
constexpr std::size_t kCiNext = 3 * sizeof(void*);    ///< CallInfo.next (5.2+)
constexpr std::size_t kTValueSize = 16;
constexpr std::size_t kProtoSizelocvars = pick51(92, 100, 36, 36);          ///< Proto.sizelocvars
constexpr std::size_t kProtoLocvars = pick51(48, 48, 80, 104);              ///< Proto.locvars
constexpr std::size_t kLocVarSize = 16, kLocVarStart = 8, kLocVarEnd = 12;  ///< LocVar

template <class T>
T at(const void* base, std::size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof v);
  return v;
}

/// CallInfo.callstatus (lstate.h): a byte on 5.2 (after nresults), an
/// unsigned short on 5.3 (after extra and nresults) and 5.4 (after u, u2 and
/// nresults). Its CIST_HOOKED marks the CallInfo a hook runs for (luaD_hook
/// sets it around the hook call, 5.2 to 5.4) and CIST_FIN the CallInfo that
/// runs a finalizer (GCTM sets it around the call: 5.3 and 5.4; 5.2 marks
/// no finalizer, kCistFin is 0 there). CIST_HOOKED is checked by probe();
/// CIST_FIN cannot be without running a collection, which the probe must
/// not do to the program (foreign.hpp says what a wrong bit costs). A read of
/// the CallInfo itself (not of the stack, which a reallocation may move under
/// the handler): safe from the handler on L's thread.
constexpr std::size_t kCiCallstatus = pick(34, 66, 62);
constexpr unsigned short kCistHooked = pick(1 << 1, 1 << 2, 1 << 3);
constexpr unsigned short kCistFin = pick(0, 1 << 8, 1 << 7);
inline unsigned short ci_status(const void* ci) {
  if constexpr (kRelease == 502) return at<unsigned char>(ci, kCiCallstatus);
  return at<unsigned short>(ci, kCiCallstatus);
}
inline bool ci_hooked(const void* ci) {
  return (ci_status(ci) & kCistHooked) != 0;
}

/// lua_State.stack_last and lua_State.stack (after ci), pointers in 5.4.0 to
/// 5.4.6 (StkIdRel's pointer member in 5.4.6).
constexpr std::size_t kStateStackLast = pick(48, 48, 40);
constexpr std::size_t kStateStack = pick(56, 56, 48);
/// lua_State.stacksize (5.2, 5.3): luaD_reallocstack frees the old stack
/// (realloc) before it sets stacksize and stack_last and moves the
/// CallInfos' pointers, so while stack_last is not stack + stacksize -
/// EXTRA_STACK a CallInfo's func may point into freed memory; once they
/// agree, a pointer not yet moved lies outside [stack, stack_last) (the old
/// and the new block were both allocated at once). 5.4 frees the old stack
/// after the pointers moved (5.4.6: they hold offsets meanwhile).
constexpr std::size_t kStateStacksize = pick(64, 184, 0);
constexpr int kExtraStack = 5;
/// The stack's bounds, as the CallInfos may be read against them: false
/// while a 5.2/5.3 reallocation is under way. Loads only.
inline bool stack_settled(const lua_State* L) {
  if constexpr (kRelease == 504) return true;
  const char* stack = at<const char*>(L, kStateStack);
  const char* last = at<const char*>(L, kStateStackLast);
  const int size = at<int>(L, kStateStacksize);
  return size > kExtraStack && last - stack == std::ptrdiff_t(size - kExtraStack) * 16;
}
/// TString's tag, short length, long length (5.3/5.4: after next, tt,
/// marked, extra; 5.2: `len` at 16 for both kinds).
constexpr std::size_t kTStringTag = 8, kTStringShrlen = 11, kTStringLnglen = 16;
/// A GC object's own tag (CommonHeader.tt) is the variant, without the
/// collectable bit a TValue's tag has.
constexpr unsigned char kTagShortString = 0x04;  ///< LUA_VSHRSTR
constexpr unsigned char kTagLongString = 0x14;   ///< LUA_VLNGSTR
/// A string's length, from its own header: false when `ts` is no string.
/// Loads only.
inline bool tstring_len(const void* ts, std::size_t& len) {
  const unsigned char tag = at<unsigned char>(ts, kTStringTag);
  if (tag != kTagShortString && tag != kTagLongString) return false;
  if constexpr (kRelease == 502)
    len = at<std::size_t>(ts, kTStringLnglen);
  else
    len = tag == kTagShortString ? at<unsigned char>(ts, kTStringShrlen)
                                 : at<std::size_t>(ts, kTStringLnglen);
  return true;
}

/// lua_State.status (a byte after CommonHeader; 5.3 puts nci, a short,
/// first): LUA_YIELD while the thread is suspended. Read and written on L's
/// own thread only (the tracer's event on a yielded thread,
/// Session::trace_yielded).
constexpr std::size_t kStateStatus = pick51(10, 10, 12, 10);
inline unsigned char status(const lua_State* L) {
  return at<unsigned char>(L, kStateStatus);
}
inline void set_status(lua_State* L, unsigned char st) {
  reinterpret_cast<unsigned char*>(L)[kStateStatus] = st;
}

/// lua_State.allowhook: 0 while a hook of L runs (luaD_hook clears it), 1
/// otherwise. One byte load: safe from the handler on L's thread.
constexpr std::size_t kStateAllowhook = pick51(101, 73, 204, 11);  ///< lu_byte
inline bool allowhook(const lua_State* L) {
  return at<unsigned char>(L, kStateAllowhook) != 0;
}

/// The function a CallInfo runs: its tag and its GC object or C function.
/// 5.1: a function's TValue has tag 6 and a Closure with isC; the tag given
/// is 5.2's for a Lua or a C closure (0 when the slot holds no function:
/// the base CallInfo's is a nil whose value was never written).
inline void func_of(const void* ci, unsigned char& tag, const void*& value) {
  if constexpr (kRelease == 0) {
    const void* func = at<const void*>(ci, kCi51Func);
    value = nullptr;
    tag = 0;
    if (!func || at<int>(func, kTValue51Tag) != LUA_TFUNCTION) return;
    value = at<const void*>(func, 0);
    if (value) tag = at<unsigned char>(value, kClosure51IsC) ? kTagCClosure : kTagLuaClosure;
    return;
  }
  const void* func = at<const void*>(ci, 0);  // CallInfo.func -> StackValue
  value = at<const void*>(func, 0);           // TValue.value_
  tag = at<unsigned char>(func, 8);           // TValue.tt_
}

/// The CallInfo a hook event is about (the hooked frame's): lua_Debug.i_ci
/// on 5.2+; on 5.1, where i_ci is an index, lua_State.ci, which the hook
/// names by that index.
inline const void* hook_ci(const lua_State* L, const lua_Debug& ar) {
#if LUA_VERSION_NUM >= 502
  (void)L;
  return ar.i_ci;
#else
  (void)ar;
  return at<const void*>(L, kState51Ci);
#endif
}

/// The Proto of the Lua function `ar` (from lua_getstack on L, or L's hook)
/// describes; null for a C function. 5.2+: loads through its CallInfo; 5.1:
/// lua_getinfo "f" and a load from the closure. Trusted when probe() set
/// proto_ok (the adapter then gives it to FrameTable::proto_of).
const void* proto_of(lua_State* L, lua_Debug* ar);

// ---- Lua 5.4.4's lua_State and global_State heads (lstate.h, LP64), for
// the allocator's "[GC]" flags; checked by alloc.cpp's find_gstate ----
struct MirrorTValue {
  void* value;
  unsigned char tt;
};
struct MirrorThread {
  void* next;
  unsigned char tt, marked, status, allowhook;
  unsigned short nci;
  void* top;
  const void* l_G;
};
struct MirrorGlobal {
  lua_Alloc frealloc;
  void* ud;
  std::ptrdiff_t totalbytes, GCdebt;
  std::size_t GCestimate, lastatomic;
  void* strt_hash;
  int strt_nuse, strt_size;
  MirrorTValue l_registry, nilvalue;
  unsigned int seed;
  unsigned char currentwhite, gcstate, gckind, gcstopem, genminormul, genmajormul, gcstp;
};
static_assert(offsetof(MirrorGlobal, gcstopem) == 103 && offsetof(MirrorGlobal, gcstp) == 106,
              "5.4.4 LP64 layout");
constexpr unsigned char kVThread = 8;               ///< LUA_VTHREAD
constexpr unsigned char kVTableCollectable = 0x45;  ///< LUA_VTABLE | BIT_ISCOLLECTABLE
constexpr unsigned char kGcStpGc = 2;               ///< GCSTPGC: inside a finalizer

/// What probe() found: which direct reads this Lua allows.
struct Layout {
  bool ci_prev_ok = false;        ///< CallInfo.previous walks the stack
  bool state_ci_ok = false;       ///< lua_State.ci is the running CallInfo
  std::size_t hookcount_off = 0;  ///< lua_State.hookcount, 0 when not found
  bool lua_ident_ok = false;  ///< a Lua function's Proto (lines, source, code) through its CallInfo
  bool c_ident_ok = false;    ///< a light C function through its CallInfo
  bool allowhook_ok = false;  ///< lua_State.allowhook: 1 outside hooks, 0 in one
  bool hooked_ok = false;     ///< CIST_HOOKED: set on the hooked CallInfo in a hook only
  bool stack_ok = false;      ///< lua_State.stack/stack_last bound CallInfo.func
  bool tstring_ok = false;    ///< a short TString's tag, length and contents
  bool proto_ok = false;      ///< proto_of: a Lua function's prototype (frames told apart by it)
  bool global_ok = false;     ///< global_of: lua_State.l_G (the state's key)
  bool tail51_ok = false;     ///< tail_call51: 5.1's tail calls told from calls (trace mode)
  /// status(): LUA_OK on a running thread, LUA_YIELD on a yielded one
  /// (checked on 5.2 and 5.3: Session::trace_yielded).
  bool status_ok = false;
  /// Finalizers and program hooks told from luaflame's hook (foreign.hpp).
  bool foreign_ok = false;
  /// Their frames copied by the handler (foreign::copy_foreign).
  bool copy_ok = false;
  /// The fast paths on and off, for the summary: "ci_walk signal_position
  /// hook_count lua_ident c_ident" (those on).
  std::string on() const;
  std::string why;         ///< "" or why a fast path is off
  bool mem_error = false;  ///< the probe's own Lua calls ran out of memory (start fails)
};

/// A call in progress on L: its running CallInfo is not the base one
/// (5.2-5.4: the one whose `previous` is null; 5.1: base_ci, the array's
/// first). False when the layout that says so was not verified at start
/// (struct Layout: state_ci_ok and ci_prev_ok, 5.1 tail51_ok). Loads from
/// L and from a CallInfo that stays allocated (as state_ci says):
/// handler-safe.
inline bool state_running(const lua_State* L, const Layout& layout) {
  if constexpr (kRelease == 0)
    return layout.tail51_ok && at<const char*>(L, kState51Ci) != at<const char*>(L, kState51BaseCi);
  return layout.state_ci_ok && layout.ci_prev_ok && ci_prev(state_ci(L)) != nullptr;
}

/// Checks every read above on a real two-level stack of L (a Lua function
/// calling a C function). Calls Lua: not from a hook or a signal handler.
Layout probe(lua_State* L);

}  // namespace lfc::luaint

// The allocation profiler (see alloc.hpp). Sampling by bytes: the distance
// to the next sample is exponential with mean alloc_rate, so an allocation
// of s bytes is sampled with probability p = 1 - exp(-s/rate) and stands
// for s/p bytes and 1/p allocations: unbiased totals (as tcmalloc and
// LuaJIT's memprof do). alloc_rate = 0 records every allocation.
#include "vm/puc/alloc.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "core/clock.hpp"
#include "vm/puc/hookchain.hpp"
#include "vm/puc/luaint.hpp"

namespace lfc {

namespace {

// The bookkeeping of a block the original allocator made or moved (`r`).
// May throw (std::bad_alloc from the maps): its callers catch.
void track(AllocState* a, void* ptr, void* r, size_t osize, size_t nsize) {
  if (!ptr) {
    // A new block: for a new object Lua passes its type as osize.
    int type = osize >= LUA_TSTRING && osize <= LUA_NUMTYPES + 1 ? static_cast<int>(osize)
                                                                 : AllocState::kBuffer;
    a->on_new(r, nsize, type);
    return;
  }
  // A moved block: its samples still pending follow it (else the hook would
  // remember the old address, which no free ever names again: live for ever).
  if (r != ptr && a->npending) a->repend(ptr, r);
  if ((r != ptr || nsize < osize) && !a->live.empty() && a->maybe_live(ptr)) {
    auto it = a->live.find(ptr);
    if (it != a->live.end()) {
      AllocState::Live lv = it->second;
      // A shrink keeps its share of what the block stood for: without it a
      // block that grows and shrinks over and over (5.2's string table,
      // resized by each collection) summed every growth: 656 KiB "live" for a
      // 16 KiB block after dkjson's 40 decodes.
      if (nsize < osize)
        lv.bytes = static_cast<uint64_t>(static_cast<double>(lv.bytes) *
                                         static_cast<double>(nsize) / static_cast<double>(osize));
      a->live.erase(it);
      a->live[r] = lv;
      a->mark_live(r);
    }
  }
  if (nsize > osize) a->on_new(r, nsize - osize, AllocState::kGrowth);
}

// What the profiler's bookkeeping threw: the allocation stands (the program
// gets its block, or the original's own failure), the profiler stops
// watching allocations and says so once (stop's summary: alloc_failed).
void give_up(AllocState* a) noexcept {
  a->active = false;
  a->fast_new = false;
  if (!a->failed)
    std::fputs(
        "luaflame: out of memory for the allocation profile: later allocations are not recorded\n",
        stderr);
  a->failed = true;
}

// Everything but the two common cases below: a block grown or moved, an
// allocation that takes a sample, exact mode, the collector's own, after stop.
__attribute__((noinline)) void* alloc_slow(AllocState* a, void* ptr, size_t osize,
                                           size_t nsize) noexcept {
  void* r = a->orig(a->orig_ud, ptr, osize, nsize);
  if (!a->active || !r) return r;
  try {
    track(a, ptr, r, osize, nsize);
  } catch (...) {
    give_up(a);
  }
  return r;
}

// A new block that takes no sample: counted after it is allocated.
__attribute__((noinline)) void* alloc_new(AllocState* a, size_t osize, size_t nsize) noexcept {
  void* r = a->orig(a->orig_ud, nullptr, osize, nsize);
  if (r) a->count_new(nsize);
  return r;
}

// A free that may concern a pending sample or a remembered block.
__attribute__((noinline)) void* free_tracked(AllocState* a, void* ptr, size_t osize) noexcept {
  try {
    a->on_free(ptr);
  } catch (...) {
    give_up(a);
  }
  return a->orig(a->orig_ud, ptr, osize, 0);
}

// The state's last free, passed on: the wrapper is no longer called.
__attribute__((noinline)) void* free_state_block(AllocState* a, void* ptr, size_t osize) noexcept {
  lua_Alloc orig = a->orig;
  void* ud = a->orig_ud;
  delete a;
  return orig(ud, ptr, osize, 0);
}

// The wrapper around the state's allocator. It keeps no frame of its own:
// a free goes straight to the original allocator (unless a sample pending
// or remembered may be that block), a new block that takes no sample (the
// countdown is larger than its size) to alloc_new, the rest to alloc_slow.
// Boundary: called by Lua (C) for every allocation; no C++ exception
// leaves it (noexcept, the bookkeeping caught), and it never raises a Lua
// error (a failed allocation is the original allocator's null).
void* lf_alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept {
  AllocState* a = static_cast<AllocState*>(ud);
  if (nsize == 0) {
    if (ptr && a->active) {
      if (a->may_track(ptr)) return free_tracked(a, ptr, osize);
    } else if (ptr == a->state_block && ptr) {
      return free_state_block(a, ptr, osize);
    }
    return a->orig(a->orig_ud, ptr, osize, nsize);
  }
  if (!ptr && a->fast_new && a->countdown > static_cast<int64_t>(nsize))
    return alloc_new(a, osize, nsize);
  return alloc_slow(a, ptr, osize, nsize);
}

// Lua 5.4.4's lua_State and global_State heads (luaint.hpp), read to tell
// allocations made by the collector: its singlestep sets gcstopem for the
// duration of a step, and a finalizer runs with GCSTPGC in gcstp. Checked
// against what the API says at start (find_gstate).
using luaint::kGcStpGc;
using luaint::MirrorGlobal;

// The state's global_State if it matches 5.4.4's layout, else null. Runs
// after lua_setallocf(L, lf_alloc, a), so frealloc/ud must be ours.
const unsigned char* find_gstate(lua_State* L, const AllocState* a) {
#if LUA_VERSION_RELEASE_NUM != 50404
  (void)L, (void)a;
  return nullptr;  // the mirror is 5.4.4's: other releases count the collector's own steps as
                   // "[GC]"
#else
  using luaint::kVTableCollectable;
  using luaint::kVThread;
  using luaint::MirrorThread;
  if (lua_version(L) != 504 || sizeof(void*) != 8) return nullptr;
  MirrorThread th;
  std::memcpy(&th, L, sizeof th);
  if (th.tt != kVThread || !th.l_G) return nullptr;
  MirrorGlobal g;
  std::memcpy(&g, th.l_G, sizeof g);
  const bool running = lua_gc(L, LUA_GCISRUNNING) == 1;
  const std::ptrdiff_t kib = lua_gc(L, LUA_GCCOUNT);
  const bool ok = g.frealloc == lf_alloc && g.ud == a && g.l_registry.tt == kVTableCollectable &&
                  g.l_registry.value == lua_topointer(L, LUA_REGISTRYINDEX) && g.nilvalue.tt == 0 &&
                  (g.currentwhite == 8 || g.currentwhite == 16) && g.gcstate <= 8 &&
                  g.gckind <= 1 && g.gcstopem == 0 && running == (g.gcstp == 0) &&
                  g.strt_size > 0 && (g.strt_size & (g.strt_size - 1)) == 0 && g.strt_nuse >= 0 &&
                  ((g.totalbytes + g.GCdebt) >> 10) == kib;
  return ok ? static_cast<const unsigned char*>(th.l_G) : nullptr;
#endif
}

}  // namespace

const char* AllocState::type_frame(int type) {
  switch (type) {
    case LUA_TSTRING:
      return "[alloc] string";
    case LUA_TTABLE:
      return "[alloc] table";
    case LUA_TFUNCTION:
      return "[alloc] function";
    case LUA_TUSERDATA:
      return "[alloc] userdata";
    case LUA_TTHREAD:
      return "[alloc] thread";
    case LUA_NUMTYPES:
      return "[alloc] upvalue";  // LUA_TUPVAL
    case LUA_NUMTYPES + 1:
      return "[alloc] proto";  // LUA_TPROTO
    case kGrowth:
      return "[alloc] resize";
    default:
      return "[alloc] buffer";
  }
}

bool AllocState::in_gc() const {
  if (!gstate) return false;
  return gstate[offsetof(MirrorGlobal, gcstopem)] ||
         (gstate[offsetof(MirrorGlobal, gcstp)] & kGcStpGc);
}

void AllocState::next_countdown() {
  // xorshift64*, then an exponential draw with mean `rate`.
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  double u = static_cast<double>((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
  countdown = static_cast<int64_t>(-std::log(1.0 - u) * rate) + 1;
}

void AllocState::sampled(void* block, std::size_t size, int type) {
  uint64_t bytes = size, count = 1;
  if (!exact) {
    double p = 1.0 - std::exp(-static_cast<double>(size) / rate);
    bytes = static_cast<uint64_t>(std::llround(static_cast<double>(size) / p));
    count = static_cast<uint64_t>(std::llround(1.0 / p));
    next_countdown();
  }
  lua_State* th = wiring.running->load(std::memory_order_relaxed);
  const void* ci = th && wiring.ci_ok ? luaint::state_ci(th) : nullptr;
  if (npending < kPending)
    pending[npending++] = Pending{block, bytes, count, type, false, in_gc(), th, ci};
  else
    lost_bytes += bytes, lost_count += count;
  request_sample();
}

void AllocState::unpend(void* block) {
  for (std::size_t i = 0; i < npending; ++i)
    if (pending[i].block == block) pending[i].freed = true;
}

void AllocState::repend(void* from, void* to) {
  for (std::size_t i = 0; i < npending; ++i)
    if (pending[i].block == from && !pending[i].freed) pending[i].block = to;
}

void AllocState::request_sample() {
  wiring.due->store(true, std::memory_order_relaxed);
  HookChain& hooks = *wiring.hooks;
  if (hooks.in_critical()) {
    hooks.defer();
    return;
  }
  hooks.begin_critical();
  hooks.arm();
  hooks.end_critical();
}

std::unique_ptr<AllocState> AllocState::start(lua_State* L, double rate, const Wiring& w) {
  auto a = std::make_unique<AllocState>();
  a->wiring = w;
  a->L = L;
  a->orig = lua_getallocf(L, &a->orig_ud);
  a->rate = rate;
  a->exact = rate <= 0;
  a->filter.assign(1u << 14, 0);
  a->rng ^= now_ns();
  if (!a->exact) a->next_countdown();
  a->active = true;
  a->fast_new = !a->exact;
  lua_setallocf(L, lf_alloc, a.get());
  a->gstate = find_gstate(L, a.get());
  return a;
}

void AllocState::pass_through(std::unique_ptr<AllocState> a, lua_State* main_L) {
  // lstate.c's fromstate: 5.3 and 5.4 keep LUA_EXTRASPACE bytes before the
  // state; 5.1 and 5.2 none (LUAI_EXTRASPACE undefined in Debian's builds).
#if LUA_VERSION_NUM >= 503
  constexpr std::size_t kExtra = LUA_EXTRASPACE;
#else
  constexpr std::size_t kExtra = 0;
#endif
  a->active = false;
  a->fast_new = false;
  a->state_block = main_L ? reinterpret_cast<const char*>(main_L) - kExtra : nullptr;
  static_cast<void>(a.release());
}

bool AllocState::restore(lua_State* L) {
  void* ud = nullptr;
  if (lua_getallocf(L, &ud) != lf_alloc || ud != this) return false;
  lua_setallocf(L, orig, orig_ud);
  return true;
}

}  // namespace lfc

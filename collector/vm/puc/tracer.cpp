// The tracer: call and return hooks, one clock read per event (TraceClock). Between two
// events, the time goes to the frame on top of the thread that ran (its
// self time); a call counts once on its path. Each shadow frame remembers
// the CallInfo it was entered with (its key: luaint::frame_key; on 5.1 the
// CallInfo's index), which keeps the shadow stack right where Lua sends no
// event:
//  - tail call: the replaced frame is dropped (the callee runs on its
//    CallInfo: luaint::tail_key; 5.1 reports it as a call, told by
//    luaint::tail_call51);
//  - an error unwinding through pcall/error: the next call names its parent
//    CallInfo (ci->previous) and the next return its own, so the frames the
//    error skipped are popped there;
//  - coroutines: every thread has its own shadow stack, hung under the frame
//    that resumed it; time while suspended goes to whatever runs instead.
// The collector's own time in the hook is measured and not charged.
// Tracer's state (tracer.hpp); its per-event code, inlined into the hook,
// is in tracer_events.hpp, and lf_hook, the hook itself, in session_hooks.cpp.
#include <algorithm>

#include "core/profile.hpp"
#include "core/tree.hpp"
#include "vm/lua/frames.hpp"
#include "vm/puc/alloc.hpp"
#include "vm/puc/tracer.hpp"

namespace lfc {

namespace {

// The layouts the call cache reads (luaint.hpp), checked by luaint::probe at
// start and again against lua_getinfo on first use.
using luaint::at;
using luaint::func_of;
using luaint::kClosureFn;
using luaint::kProtoCode;
using luaint::kProtoLine;
using luaint::kProtoSource;
using luaint::kTagCClosure;
using luaint::kTagLightC;
using luaint::kTagLuaClosure;
using luaint::kTStringContents;

// Samples deeper than this take the walk (and its depth limit, sampler.cpp).
constexpr long kTracedDepth = 1000;

// Index of the topmost entry entered with `ci`, or -1.
long find_ci(const Shadow::Stack& st, const void* ci) {
  for (std::size_t k = st.size(); k-- > 0;)
    if (st[k].ci == ci) return static_cast<long>(k);
  return -1;
}

}  // namespace

void Tracer::charge_now() {
  if (!last_sh || col_time_ < 0) return;
  uint64_t now = tclock.now();
  if (now > last_tick)
    tree_.add(last_sh->top(), col_time_,
              tclock.to_ns(now - last_tick));  // cold path
  last_tick = now;
}

// The child of `parent` for the function being called: through the call
// cache when the layouts are known good, else lua_getinfo and the frame table.
uint32_t Tracer::callee_node(lua_State* L, lua_Debug* ar, uint32_t parent,
                             std::atomic<uint64_t>*& slots) {
  // What naming allocates through the state is the collector's.
  struct Busy {
    AllocState* a;
    bool was;
    explicit Busy(AllocState* s) : a(s), was(s && s->busy) {
      if (a) a->busy = true;
    }
    ~Busy() {
      if (a) a->busy = was;
    }
  } busy(alloc_.get());
  unsigned char tag = 0;
  const void* value = nullptr;
  const void* ident = nullptr;
  const void* check = nullptr;
  // The CallInfo reads hold where trace mode runs: on 5.2+ ci_walk_ok, on
  // 5.1 Layout::tail51_ok (session.cpp's trace_refused).
  if (luaint::kRelease == 0 || ci_walk_ok_) {
    func_of(luaint::hook_ci(L, *ar), tag, value);
    if (tag == kTagLuaClosure && ident_lua >= 0) {
      ident = at<const void*>(value, kClosureFn);
      check = at<const void*>(ident, kProtoCode);
      if (ident_lua == 0) {
        // Check the Proto layout against what lua_getinfo says.
        lua_getinfo(L, "S", ar);
        const void* src = at<const void*>(ident, kProtoSource);
        bool ok = at<int>(ident, kProtoLine) == ar->linedefined &&
                  at<int>(ident, kProtoLine + 4) == ar->lastlinedefined && src &&
                  static_cast<const char*>(src) + kTStringContents == ar->source;
        ident_lua = ok ? 1 : -1;
        if (!ok) ident = nullptr;
      }
    } else if ((tag == kTagLightC || tag == kTagCClosure) && ident_c >= 0) {
      ident = tag == kTagLightC ? value : at<const void*>(value, kClosureFn);
      if (ident_c == 0) {
        lua_getinfo(L, "f", ar);
        bool ok = reinterpret_cast<const void*>(lua_tocfunction(L, -1)) == ident;
        lua_pop(L, 1);
        ident_c = ok ? 1 : -1;
        if (!ok) ident = nullptr;
      }
    }
  }
  if (ident) {
    CallCache& c = call_cache[CallCache::slot(ident, parent, call_bits)];
    if (c.ident == ident && c.parent == parent && c.check == check && c.child) {
      slots = c.slots;
      return c.child;
    }
    const uint32_t frame = frame_of_ident(L, ar, tag, ident, check);
    if (host_entry(parent, frame, slots)) return 0;  // never cached: its calls take this path
    uint32_t node = tree_.child(parent, frame);
    slots = tree_.slots(node);
    c = CallCache{ident, check, parent, node, slots};
    if (++call_misses > (call_cache.size() << 1)) grow_call_cache();
    return node;
  }
  lua_getinfo(L, "S", ar);
  const uint32_t frame = frames_.of(L, ar);
  if (host_entry(parent, frame, slots)) return 0;
  uint32_t node = tree_.child(parent, frame);
  slots = tree_.slots(node);
  return node;
}

// A C function called at the tree's root is the host's entry into the
// program (a worker's lua_cpcall, a C function a host runs by lua_pcall):
// the walk of a sample leaves out every C frame at the
// bottom of the stack (stackwalk.cpp), and seed_shadow those on the stack
// at start, so the trace leaves out the one entered later too. Its shadow
// entry is the root itself: what it calls hangs from the root, and its own
// time is the root's, as a sample taken in it falls on the root.
bool Tracer::host_entry(uint32_t parent, uint32_t frame, std::atomic<uint64_t>*& slots) {
  if (parent != 0 || !frames_.is_c(frame)) return false;
  slots = tree_.slots(0);
  return true;
}

// A function's frame from its identity, else from lua_getinfo and the
// frame table (which names it the first time). Same answer as the frame
// table's: it keys Lua functions by source and line, C ones by address.
uint32_t Tracer::frame_of_ident(lua_State* L, lua_Debug* ar, unsigned char tag, const void* ident,
                                const void* check) {
  const bool lua_fn = tag == kTagLuaClosure;
  const void* source = lua_fn ? at<const void*>(ident, kProtoSource) : nullptr;
  const int line = lua_fn ? at<int>(ident, kProtoLine) : 0;
  auto it = ident_frames.find(ident);
  if (it != ident_frames.end() && it->second.check == check && it->second.source == source &&
      it->second.line == line)
    return it->second.frame;
  lua_getinfo(L, "S", ar);
  const uint32_t frame = frames_.of(L, ar);
  // Entries of functions since freed stay until their address is reused:
  // a program that makes functions without end gets a fresh map now and then.
  if (ident_frames.size() >= (std::size_t{1} << 16)) ident_frames.clear();
  ident_frames[ident] = IdentFrame{check, source, line, frame};
  return frame;
}

// A program whose working set of (caller path, function) pairs overflows
// the call cache (luacheck: 175,000 paths) misses it on one call in ten,
// each miss a hash lookup in the tree's map, cold in the cache: past two
// misses per entry since the last growth, four times the entries (up to
// CallCache::kMaxBits). Small programs keep the small cache.
void Tracer::grow_call_cache() {
  call_misses = 0;
  if (call_bits >= CallCache::kMaxBits) return;
  call_bits = std::min(call_bits + 2, CallCache::kMaxBits);
  call_cache.assign(std::size_t{1} << call_bits, CallCache{});
}

std::size_t Tracer::memory_bytes() const {
  std::size_t b = 0;
  for (const auto& kv : shadows) b += 64 + kv.second.stack.capacity() * sizeof(Shadow::Entry);
  return b + call_cache.capacity() * sizeof(CallCache) + ident_frames.size() * 64;
}

// Rare cases of an event whose CallInfo is not the expected one: a tail
// call (its frame replaces the one with the same CallInfo), a call or a
// return after an error unwound frames without return events.
void Tracer::unwind(Shadow::Stack& st, const void* ci, int ev) {
  if (ev == LUA_HOOKRET) {
    long k = find_ci(st, ci);
    if (k >= 0) st.resize(static_cast<std::size_t>(k));
    return;
  }
  long k = ev == LUA_HOOKTAILCALL ? find_ci(st, ci) : -1;
  if (k >= 0) {
    st.resize(static_cast<std::size_t>(k));
  } else {
    // Called from the frame entered with ci->previous; a caller the
    // tracer never saw (the host's C entry, a coroutine's base) means root.
    long p = find_ci(st, luaint::key_below(ci));
    st.resize(static_cast<std::size_t>(p + 1));
  }
}

// One event in 256 also reads the clock on the way out: the mean hook cost,
// reported and not charged. (Two reads per event would cost more.) The
// estimate taken off each interval follows the typical event (a moving
// average with outliers clipped: first sightings that build the tree, the
// thread being preempted); the report counts them all.
void Tracer::measure_hook(uint64_t t0) {
  const uint64_t d = tclock.now() - t0;
  hook_sampled += d;
  if (hook_sampled_n == 0 || d < hook_least) hook_least = d;
  // For the report: a measurement the thread was preempted in (wall ticks)
  // is left out rather than clipped; no hook event takes 100 us of CPU.
  if (tclock.to_ns(d) < 100000) {
    hook_kept += d;
    ++hook_kept_n;
  }
  if (hook_sampled_n++ < 8)
    hook_est = hook_sampled / hook_sampled_n;
  else
    hook_est +=
        (static_cast<int64_t>(std::min(d, 4 * hook_est + 64)) - static_cast<int64_t>(hook_est)) /
        16;
}

// The fast path's own cost, the way measure_hook takes the slow path's:
// the mean of the first 8, then a moving mean that one preempted
// measurement cannot move far.
void Tracer::measure_fast(uint64_t t0) noexcept {
  const uint64_t d = read_cycles() - t0;
  if (fast_sampled_n < 8) {
    fast_sampled += d;
    fast_est = fast_sampled / ++fast_sampled_n;
  } else {
    fast_est +=
        (static_cast<int64_t>(std::min(d, 4 * fast_est + 64)) - static_cast<int64_t>(fast_est)) /
        16;
  }
}

// Both mode: where a sample falls, the tracer already has the stack. The
// node of the frame entered with `ci` on thread L's shadow stack (the
// running CallInfo when `ci` is null), without a walk; false when the
// walk must decide: no trace, leaf lines asked, another thread, a frame
// not (or no longer) on the stack, a stack deep enough that the walk's
// depth limit might cut it. Lua thread, inside the hook (no event races).
bool Tracer::traced_node(lua_State* L, lua_State* T, const void* ci, uint32_t& node) {
  if (!opt_.trace || opt_.lines || T != L || !ci_walk_ok_) return false;
  if (!ci) {
    if (!layout_.state_ci_ok) return false;
    ci = luaint::state_ci(L);
  }
  Shadow* sh = L == last_L && last_sh ? last_sh : nullptr;
  if (!sh) {
    auto it = shadows.find(L);
    if (it == shadows.end()) return false;
    sh = &it->second;
  }
  const long k = find_ci(sh->stack, ci);
  if (k < 0 || k >= kTracedDepth) return false;
  node = sh->stack[static_cast<std::size_t>(k)].node;
  return true;
}

void Tracer::start(lua_State* L, bool fast_ok) {
  Shadow& sh = shadows[L];
  seed_shadow(L, sh, L, true);
  last_L = L;
  last_sh = &sh;
  tclock.init();
  call_cache.resize(std::size_t{1} << CallCache::kBits);
  trace_fast_ok = fast_ok && tclock.tsc;  // else every event takes Session::hook
  last_tick = tclock.now();
}

void Tracer::resumed(lua_State* L, lua_State* co) {
  charge_now();
  Shadow& parent = shadows[L];
  Shadow& sh = shadows[co];
  if (sh.root != parent.top()) reroot(sh, parent.top());
  last_L = co;
  last_sh = &sh;
}

void Tracer::returned(lua_State* L, lua_State* co) {
  charge_now();
  last_L = L;
  last_sh = &shadows[L];
  if (lua_status(co) != LUA_YIELD) shadows.erase(co);  // finished or failed: its stack is gone
}

void Tracer::hooked(lua_State* co, lua_State* via) {
  Shadow& sh = shadows[co];
  sh.stack.clear();
  seed_shadow(co, sh, via);
}

void Tracer::seed_shadow(lua_State* T, Shadow& sh, lua_State* via, bool starting) {
  struct Level {
    uint32_t frame;
    const void* ci;
  };
  std::vector<Level> levels;  // leaf first
  lua_Debug ar;
  // 5.1's lua_Debug names a level by its index in the thread's own
  // CallInfo array: asked of T itself there (as ldblib.c does), of the
  // running thread on 5.2+.
  lua_State* info = LUA_VERSION_NUM == 501 ? T : via;
  for (int level = 0; lua_getstack(T, level, &ar); ++level) {
    lua_getinfo(info, "S", &ar);
    if (ar.what[0] == 't') continue;  // 5.1's "(tail call)": no frame of its own
    levels.push_back({frames_.of(info, &ar), luaint::frame_key(ar)});
  }
  // The host's C entry at the bottom is not part of the program, nor at
  // start the C function that called it on top (luaflame.start, attach's
  // start_session, run under a hook in a forked child where no return
  // event takes it off): as LuaJIT's tracer seeds (JTracer::seed).
  if (starting && !levels.empty() && frames_.is_c(levels.front().frame))
    levels.erase(levels.begin());
  while (!levels.empty() && frames_.is_c(levels.back().frame)) levels.pop_back();
  uint32_t node = sh.root;
  for (std::size_t i = levels.size(); i-- > 0;) {
    node = tree_.child(node, levels[i].frame);
    sh.stack.push_back({node, levels[i].ci, tree_.slots(node)});
  }
}

void Tracer::reroot(Shadow& sh, uint32_t root) {
  sh.root = root;
  sh.root_slots = tree_.slots(root);
  uint32_t node = root;
  for (auto& e : sh.stack) {
    node = tree_.child(node, tree_.frame(e.node));
    e.node = node;
    e.slots = tree_.slots(node);
  }
}

}  // namespace lfc

// The session's side of the allocation profiler (alloc.hpp: the
// allocator's state and contract): it starts the wrapper, takes the samples
// the allocator left pending at its hook (each charged to the stack that
// made the block, the object type as the leaf) and at stop collects what is
// still live: the leak graph.
#include "core/clock.hpp"
#include "vm/puc/alloc.hpp"
#include "vm/puc/session.hpp"

namespace lfc {

bool Session::start_alloc(std::string&) {
  const AllocState::Wiring w{&hooks, &coroutines.current(), layout.state_ci_ok && ci_walk_ok,
                             &alloc_pending};
  alloc = AllocState::start(start_L, opt.alloc_rate, w);
  return true;
}

void Session::take_alloc(lua_State* L) {
  alloc_pending.store(false, std::memory_order_relaxed);
  AllocState* a = alloc.get();
  if (!a || (!a->npending && !a->lost_count)) return;
  const uint64_t t0 = now_ns();
  // Stacks by where each block was made: consecutive samples mostly share it.
  lua_State* at_th = nullptr;
  const void* at_ci = nullptr;
  uint32_t base = 0, gc_base = UINT32_MAX, here = UINT32_MAX;  // here: the hook's own stack
  for (std::size_t i = 0; i < a->npending; ++i) {
    const AllocState::Pending& p = a->pending[i];
    if (i == 0 || p.th != at_th || p.ci != at_ci) {
      at_th = p.th, at_ci = p.ci, gc_base = UINT32_MAX;
      if (!p.ci || !walker.node(L, base, p.th, p.ci)) {
        if (here == UINT32_MAX) walker.node(L, here);
        base = here;
      }
    }
    if (p.gc && gc_base == UINT32_MAX) gc_base = tree.child(base, frames.named("[GC]"));
    uint32_t leaf = tree.child(p.gc ? gc_base : base, frames.named(AllocState::type_frame(p.type)));
    tree.add(leaf, col_abytes, p.bytes);
    tree.add(leaf, col_acount, p.count);
    if (!p.freed && p.block) {
      AllocState::Live& lv = a->live[p.block];
      lv.bytes = p.type == AllocState::kGrowth ? lv.bytes + p.bytes : p.bytes;
      lv.node = leaf;
      a->mark_live(p.block);
    }
  }
  a->npending = 0;
  if (a->lost_count) {
    uint32_t lost = tree.child(0, frames.named("[alloc] unattributed"));
    tree.add(lost, col_abytes, a->lost_bytes);
    tree.add(lost, col_acount, a->lost_count);
    a->lost_bytes = a->lost_count = 0;
  }
  acct.hook_ns += now_ns() - t0;
}

void Session::stop_alloc(lua_State* L, bool collect) {
  AllocState* a = alloc.get();
  if (!a) return;
  if (L && a->npending) {
    a->busy = true;
    take_alloc(L);
  }
  if (L && collect) {
    // Live bytes are what survives a full collection: a leak graph.
    a->busy = true;
    lua_gc(L, LUA_GCCOLLECT);
    lua_gc(L, LUA_GCCOLLECT);
  }
  for (const auto& kv : a->live) tree.add(kv.second.node, col_live, kv.second.bytes);
  alloc_total_bytes = a->total_bytes;
  alloc_total_count = a->total_count;
  a->active = false;
  a->fast_new = false;
  a->live = {};
  a->filter = {};
  if (L && collect && a->restore(L))
    alloc.reset();
  else
    AllocState::pass_through(std::move(alloc), main_L);  // AllocState::restore says why it stays
}

}  // namespace lfc

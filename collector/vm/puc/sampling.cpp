// Sample taking (sampling.hpp: the contract of the handler's side).
#include "vm/puc/sampling.hpp"

#include "core/profile.hpp"
#include "core/tree.hpp"
#include "vm/lua/frames.hpp"
#include "vm/puc/stackwalk.hpp"
#include "vm/puc/tracer.hpp"

namespace lfc {

uint32_t Sampling::program_node(lua_State* L, const Sampler::Pos* p, uint64_t k) {
  uint32_t node = 0;
  if (tracer_.traced_node(L, p ? p->L : L, p ? p->ci : nullptr, node)) return node;
  if (p && walker_.node(L, node, p->L, p->ci)) return node;
  if (p) acct_.samples_moved += k;
  walker_.node(L, node);
  return node;
}

// The anchor ran the finalizer or the hook and is still on the stack when
// the hook takes the sample unless it returned first (then the hook's stack
// stands for it, as for any moved sample). Above it the frames the handler
// copied; none copied: one frame saying what ran. No anchor (a 5.2
// finalizer): the hook's stack, where the collection ran.
uint32_t Sampling::foreign_node(lua_State* L, const Sampler::Pos& p, uint64_t k) {
  uint32_t node = program_node(L, p.copy.anchor ? &p : nullptr, k);
  if (p.copy.nframes == 0) {
    uint32_t& f = p.copy.kind == foreign::Copy::kHook ? program_hook_frame_ : gc_frame_;
    if (!f)
      f = frames_.named(p.copy.kind == foreign::Copy::kHook ? "[hook] program hook"
                                                            : "[gc] finalizer");
    return tree_.child(node, f);
  }
  const bool fin = p.copy.kind == foreign::Copy::kFinalizer;
  for (int j = 0; j < p.copy.nframes; ++j) {
    const char* c_name = j > 0 ? "[C] <anon>" : fin ? "[C] __gc" : "[C] hook";
    node = tree_.child(node, frames_.of_copy(p.copy.frames[j], c_name));
  }
  if (p.copy.deeper) {
    if (!deeper_frame_) deeper_frame_ = frames_.named("[luaflame] deeper frames");
    node = tree_.child(node, deeper_frame_);
  }
  return node;
}

void Sampling::take(lua_State* L) {
  uint64_t t0 = opt_.trace ? tracer_.tclock.now() : now_ns();
  // Owed periods and recorded positions, taken together so that no signal
  // lands between the two reads.
  Sampler::Pos pos[Sampler::kMaxPos];
  int n = 0;
  sampler_.rouse();
  hooks_.begin_critical();
  uint64_t w = sampler_.drain(pos, n);
  hooks_.end_critical();
  if (!w) return;
  // Each recorded position its periods and its share of the rest
  // (Sampler::share); none recorded (no layout, or deferred): the hook's
  // stack takes them all.
  uint64_t ks[Sampler::kMaxPos];
  Sampler::share(pos, n, w, ks);
  for (int i = 0; i < n || (i == 0 && n == 0); ++i) {
    const uint64_t k = n == 0 ? w : ks[i];
    if (k == 0) continue;
    acct_.samples += k;
    // No CallInfo recorded (5.1, or a slot a failed foreign copy
    // overwrote): the hook's stack.
    const bool own = n == 0 || (!pos[i].foreign && !pos[i].ci);
    if (n > 0 && pos[i].in_hook && hook_frame) {
      // luaflame's own time: the profiler's cost, not the program's.
      acct_.samples_in_hooks += k;
      if (!show_profiler) continue;
      tree_.add(tree_.child(program_node(L, own ? nullptr : &pos[i], k), hook_frame), col_samples_,
                k);
      continue;
    }
    const uint32_t node = own              ? program_node(L, nullptr, k)
                          : pos[i].foreign ? foreign_node(L, pos[i], k)
                                           : program_node(L, &pos[i], k);
    tree_.add(node, col_samples_, k);
  }
  ++acct_.sample_events;
  if (opt_.trace) {
    uint64_t dt = tracer_.tclock.now() - t0;
    acct_.hook_ns += tracer_.tclock.to_ns(dt);
    tracer_.last_tick += dt;  // not charged to the program's frames
  } else {
    acct_.hook_ns += now_ns() - t0;
  }
}

}  // namespace lfc

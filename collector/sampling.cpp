// Sample taking (sampling.hpp: the contract of the handler's side).
#include "sampling.hpp"

#include "session.hpp"

namespace lfc {

void Sampling::take(lua_State* L) {
  uint64_t t0 = opt_.trace ? tracer_.tclock.now() : now_ns();
  // Owed periods and recorded positions, taken together so that no signal
  // lands between the two reads.
  Sampler::Pos pos[Sampler::kMaxPos];
  int n = 0;
  hooks_.begin_critical();
  uint64_t w = sampler_.drain(pos, n);
  hooks_.end_critical();
  if (!w) return;
  // Each recorded position its periods, the rest (signals deferred by a
  // critical section, a full buffer, the polling thread's coalesced
  // signals) to the last one; none recorded (no layout, or deferred): the
  // hook's stack.
  for (int i = 0; i < n || (i == 0 && n == 0); ++i) {
    uint64_t k = w;
    if (n > 0 && i + 1 < n) k = pos[i].weight < w - 1 ? pos[i].weight : w - 1;
    if (k == 0) continue;
    w -= k;
    uint32_t node = 0;
    if (!tracer_.traced_node(L, n > 0 ? pos[i].L : L, n > 0 ? pos[i].ci : nullptr, node)) {
      bool ok = n > 0 && walker_.node(L, node, pos[i].L, pos[i].ci);
      if (!ok) {
        if (n > 0) acct_.samples_moved += k;
        walker_.node(L, node);
      }
    }
    if (n > 0 && pos[i].in_hook && hook_frame) {
      node = tree_.child(node, hook_frame);
      acct_.samples_in_hooks += k;
    }
    tree_.add(node, col_samples_, k);
    acct_.samples += k;
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

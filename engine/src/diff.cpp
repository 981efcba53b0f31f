// engine, stage 3: differential trees (what difffolded.pl feeds flamegraph.pl).
#include "luaflame/diff.hpp"

#include <vector>

namespace lf {

namespace {

// Adds every node of `src` to `out` by path, its self value (scaled) into
// column `col`. Nodes are numbered after their parents, so one pass in index
// order sees every parent mapped before its children.
void merge_into(Tree& out, const Tree& src, int col, double scale) {
  int src_col = src.differential() ? 1 : 0;  // a differential input counts by its "after"
  std::vector<uint32_t> frame_map(src.frame_count(), Tree::kNone);
  std::vector<uint32_t> node_map(src.size(), Tree::kRoot);
  for (uint32_t i = 0; i < src.size(); ++i) {
    if (i != Tree::kRoot) {
      uint32_t f = src.frame_of(i);
      if (frame_map[f] == Tree::kNone) frame_map[f] = out.intern(src.frame_name(f));
      node_map[i] = out.child(node_map[src.parent_of(i)], frame_map[f]);
    }
    double v = src.self_at(i, src_col);
    if (v != 0) out.add_self(node_map[i], v * scale, col);
  }
}

}  // namespace

Tree diff_trees(const Tree& before, const Tree& after, const DiffOptions& opts) {
  Tree out;
  out.set_differential(true);
  double scale = 1;
  double tb = before.total(before.differential() ? 1 : 0);
  double ta = after.total(after.differential() ? 1 : 0);
  // difffolded.pl -n: scale "before" to the total of "after".
  if (opts.normalize && tb > 0 && ta > 0) scale = ta / tb;
  merge_into(out, before, 0, scale);
  merge_into(out, after, 1, 1);
  out.finalize();
  return out;
}

}  // namespace lf

// engine, stage 3: differential trees (what difffolded.pl feeds flamegraph.pl).
#include "luaflame/diff.hpp"

#include <cmath>
#include <vector>

namespace lf {

namespace {

// Adds every node of `src` to `out` by path, its self value into column
// `col`, scaled by num/den and rounded down when `scale` (difffolded.pl -n:
// int($count * $total2 / $total1), per stack; a node's self is the sum of its
// stack's lines). Nodes are numbered after their parents, so one pass in index
// order sees every parent mapped before its children.
void merge_into(Tree& out, const Tree& src, int col, bool scale, double num, double den) {
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
    if (scale) v = std::floor(v * num / den);  // in this order, as Perl evaluates it
    if (v != 0) out.add_self(node_map[i], v, col);
  }
}

}  // namespace

Tree diff_trees(const Tree& before, const Tree& after, const DiffOptions& opts) {
  Tree out;
  out.set_differential(true);
  double tb = before.total(before.differential() ? 1 : 0);
  double ta = after.total(after.differential() ? 1 : 0);
  // difffolded.pl -n: scale "before" to the total of "after" (only when they differ).
  bool scale = opts.normalize && tb > 0 && ta > 0 && ta != tb;
  merge_into(out, before, 0, scale, ta, tb);
  merge_into(out, after, 1, false, 1, 1);
  out.finalize();
  return out;
}

}  // namespace lf

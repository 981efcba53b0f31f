// engine internals: where each frame of a flame graph goes.
//
// One layout for both outputs of stage 4, the SVG (svg.cpp) and the frames
// as data (frames.cpp): flamegraph.pl's geometry (paddings, --minwidth
// pruning, children order, the root spanning --total) and colours, so the
// page drawing the data and the standalone SVG show the same graph.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"
#include "svg_colors.hpp"

namespace lf {
namespace detail {

constexpr double kXPad = 10;     // left and right padding
constexpr double kFramePad = 1;  // vertical gap between frames

// A frame to draw: its node, depth, where it starts (in count units) and,
// once placed, its x extent in pixels (unrounded) and its value.
struct Placed {
  uint32_t node = 0;
  uint32_t depth = 0;
  double start = 0;
  double x1 = 0, x2 = 0;
  double total = 0;
};

class Placer {
 public:
  Placer(const Tree& tree, const SvgOptions& o)
      : tree_(tree), o_(o), pal_(palette_from_name(o.colors)) {
    col_ = tree.differential() && o.differential_as_after ? 1 : 0;
    double time = tree.total(col_);
    timemax_ = o.total > time ? o.total : time;
    double width = o.width > 0 ? o.width : 1200;
    wpt_ = timemax_ > 0 ? (width - 2 * kXPad) / timemax_ : 0;
    min_time_ =
        o.min_width_percent ? timemax_ * o.min_width / 100 : (wpt_ > 0 ? o.min_width / wpt_ : 0);
    // flamegraph.pl's $maxdelta starts at 1: changes below one count stay pale.
    if (tree.differential()) {
      max_delta_ = 1;
      for (uint32_t i = 1; i < tree.size(); ++i)
        max_delta_ = std::max(max_delta_, std::fabs(delta(i)));
    }
  }

  int col() const { return col_; }
  double timemax() const { return timemax_; }
  Palette palette() const { return pal_; }

  // Self of the "after" column less the "before" one (differential trees).
  double delta(uint32_t n) const { return tree_.self_at(n, 1) - tree_.self_at(n, 0); }

  bool drawn(uint32_t n) const {
    double v = tree_.total_at(n, col_);
    return v > 0 && v >= min_time_;
  }

  // The deepest frame that will be drawn. Totals only shrink going up the
  // stack, so every ancestor of a drawn frame is drawn too: a linear pass
  // over the nodes (parents come first) finds it without a traversal.
  uint32_t depth_max() const {
    std::vector<uint16_t> depth(tree_.size(), 0);
    uint32_t best = 0;
    for (uint32_t i = 1; i < tree_.size(); ++i) {
      uint32_t d = depth[tree_.parent_of(i)] + 1u;
      depth[i] = uint16_t(std::min<uint32_t>(d, 65535));
      if (drawn(i)) best = std::max(best, d);
    }
    return best;
  }

  // The fill of node n: the palette's colour of its name, or in a
  // differential graph red (grew) or blue (shrank) by its delta.
  uint32_t rgb(uint32_t n) {
    if (tree_.differential()) return diff_color(delta(n), max_delta_, o_.negate);
    uint32_t f = n == Tree::kRoot ? 0 : tree_.frame_of(n);
    if (colors_.size() <= f) colors_.resize(tree_.frame_count(), 0);
    if (!colors_[f]) colors_[f] = frame_color(pal_, tree_.frame_name(f), o_.hash) + 1;
    return colors_[f] - 1;
  }

  // Calls visit(const Placed&) for every drawn frame in depth-first
  // pre-order with flamegraph.pl's pruning: a frame narrower than
  // --minwidth is dropped with everything above it, but still takes its
  // place on the x axis. Children go in flamegraph.pl's order (see
  // Tree::frame_ranks) unless this is a flame chart.
  template <class Visit>
  void walk(Visit&& visit) const {
    const std::vector<uint32_t>& rank = tree_.frame_ranks();
    std::vector<Placed> stack{Placed{Tree::kRoot, 0, 0}};
    std::vector<uint32_t> kids;
    bool sort = !(tree_.flamechart() || o_.flamechart);
    auto by_rank = [&](uint32_t a, uint32_t b) {
      return rank[tree_.frame_of(a)] < rank[tree_.frame_of(b)];
    };
    while (!stack.empty()) {
      Placed it = stack.back();
      stack.pop_back();
      place(it);
      visit(static_cast<const Placed&>(it));
      kids.clear();
      for (uint32_t c = tree_.first_child(it.node); c != Tree::kNone; c = tree_.next_sibling(c))
        kids.push_back(c);
      if (sort && !std::is_sorted(kids.begin(), kids.end(), by_rank))
        std::stable_sort(kids.begin(), kids.end(), by_rank);
      // flamegraph.pl sorts the lines, and "A;B N" (B's self) sorts before
      // "A;B;C N": a frame's self time comes first, its children after.
      std::size_t mark = stack.size();
      double x = it.start + std::max(0.0, tree_.self_at(it.node, col_));
      for (uint32_t c : kids) {
        if (drawn(c)) stack.push_back({c, it.depth + 1, x});
        x += tree_.total_at(c, col_);
      }
      std::reverse(stack.begin() + std::ptrdiff_t(mark), stack.end());
    }
  }

 private:
  // The root spans --total when that is larger, and the whole width.
  void place(Placed& it) const {
    bool root = it.node == Tree::kRoot;
    it.total = root ? timemax_ : tree_.total_at(it.node, col_);
    double width = o_.width > 0 ? o_.width : 1200;
    it.x1 = kXPad + it.start * wpt_;
    it.x2 = root ? width - kXPad : kXPad + (it.start + it.total) * wpt_;
  }

  const Tree& tree_;
  const SvgOptions& o_;
  Palette pal_;
  int col_ = 0;
  double timemax_ = 0, wpt_ = 0, min_time_ = 0, max_delta_ = 0;
  std::vector<uint32_t> colors_;  // 0xRRGGBB + 1 per frame (0 = not yet)
};

}  // namespace detail
}  // namespace lf

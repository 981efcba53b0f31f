// luaflame engine, stage 2: merging stacks into a call tree.
//
// Frames are interned once; a node is (parent, frame). Each node keeps self
// and total values for up to two columns (column 1 is "after"/head in a
// differential tree). Children keep insertion order until sort_children().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "luaflame/folded.hpp"

namespace lf {

class Tree {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Node {
    uint32_t frame = 0;  ///< index into frames()
    uint32_t parent = kNone;
    uint32_t first_child = kNone;
    uint32_t next_sibling = kNone;
    uint32_t depth = 0;  ///< root is 0
    double self[2] = {0, 0};
    double total[2] = {0, 0};
  };

  Tree();

  /// Interns a frame name, returns its index.
  uint32_t intern(std::string_view name);
  /// Child of `parent` named `frame`, created when missing.
  uint32_t child(uint32_t parent, uint32_t frame);
  /// Adds `value` to the self value (column `col`) of the node reached by `stack`
  /// (frames separated by ';'). Totals are computed by finalize().
  void add(std::string_view stack, double value, int col = 0);
  /// Adds a parsed line (both columns when differential).
  void add(const FoldedLine& line);
  /// Computes totals bottom-up. Call after the last add().
  void finalize();
  /// Sorts every node's children by frame name (flamegraph.pl's order).
  void sort_children();

  const Node& node(uint32_t i) const { return nodes_[i]; }
  std::size_t size() const { return nodes_.size(); }
  const std::string& frame_name(uint32_t frame) const { return frames_[frame]; }
  std::size_t frame_count() const { return frames_.size(); }
  double total(int col = 0) const { return nodes_[kRoot].total[col]; }
  bool differential() const { return differential_; }
  void set_differential(bool d) { differential_ = d; }

  /// Node reached from the root by `path` (frames separated by ';'), or kNone.
  uint32_t find(std::string_view path) const;
  /// The ';'-joined path from the root to node `i`.
  std::string path(uint32_t i) const;

 private:
  std::vector<Node> nodes_;
  std::vector<std::string> frames_;
  std::unordered_map<std::string_view, uint32_t> frame_index_;  // views into stable storage
  std::unordered_map<uint64_t, uint32_t> child_index_;          // (parent<<32|frame) -> node
  bool differential_ = false;
};

/// Per-function summary: self and total, where total counts a function once
/// per stack even when it recurses.
struct FunctionStat {
  std::string name;
  double self = 0;
  double total = 0;
};
/// Function table of a finalized tree, column `col`, sorted by self descending.
std::vector<FunctionStat> function_stats(const Tree& tree, int col = 0);

/// Writes the tree back out as folded text (one line per node with self != 0),
/// with two count columns when the tree is differential. Deterministic order.
void write_folded(const Tree& tree, std::string& out);

}  // namespace lf

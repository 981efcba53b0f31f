// luaflame engine, stage 2: merging stacks into a call tree.
//
// Frames are interned once; a node is (parent, frame). Each node keeps self
// and total values for up to two columns (column 1 is "after"/head in a
// differential tree). Children keep insertion order until sort_children().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "luaflame/folded.hpp"

namespace lf {

namespace detail {
/// Allocator for the tree's big columns: blocks of 4 MiB and more come from
/// mmap with transparent huge pages requested (fewer TLB misses and page
/// faults on millions of nodes); smaller ones from operator new.
template <class T>
struct BigAlloc {
  using value_type = T;
  BigAlloc() = default;
  template <class U>
  // NOLINTNEXTLINE(google-explicit-constructor): allocators convert implicitly
  BigAlloc(const BigAlloc<U>&) {}
  T* allocate(std::size_t n);
  void deallocate(T* p, std::size_t n);
  template <class U>
  bool operator==(const BigAlloc<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const BigAlloc<U>&) const {
    return false;
  }
};
void* big_alloc(std::size_t bytes);
void big_free(void* p, std::size_t bytes);
template <class T>
T* BigAlloc<T>::allocate(std::size_t n) {
  return static_cast<T*>(big_alloc(n * sizeof(T)));
}
template <class T>
void BigAlloc<T>::deallocate(T* p, std::size_t n) {
  big_free(p, n * sizeof(T));
}
template <class T>
using BigVector = std::vector<T, BigAlloc<T>>;
}  // namespace detail

class Tree {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  /// A node as callers see it (a copy assembled from the tree's compact
  /// columns; bind it by value or const reference).
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
  /// Consecutive stacks that share a prefix reuse the nodes of that prefix
  /// without hashing it again (flamegraph.pl's flow()), so sorted input is fast.
  void add(std::string_view stack, double value, int col = 0);
  /// Adds a parsed line (both columns when differential). A single-column
  /// line in a differential tree counts the same before and after.
  void add(const FoldedLine& line);
  /// Adds `value` to the self value of node `i`, column `col`.
  void add_self(uint32_t i, double value, int col = 0);
  /// Computes totals bottom-up and links every node's children in creation
  /// (input) order. Call after the last add(); calling it again after more
  /// add()s is fine (it also undoes sort_children()).
  void finalize();
  /// Sorts every node's children by frame name in flamegraph.pl's order
  /// (bytes, a name compared as if followed by ';', as in a sorted folded
  /// file: "f a.lua:12" before "f a.lua:1"). Call after finalize().
  void sort_children();
  /// Flame chart mode (--flamechart): a stack merges only with the stack
  /// added just before it, so the x axis keeps input order. Set before the
  /// first add(). Default: false.
  void set_flamechart(bool on) { flamechart_ = on; }
  bool flamechart() const { return flamechart_; }
  /// Reserves room for about `nodes` nodes (a hint; avoids regrowth).
  void reserve(std::size_t nodes);

  Node node(uint32_t i) const;
  std::size_t size() const { return links_.size(); }
  const std::string& frame_name(uint32_t frame) const { return frames_[frame]; }
  std::size_t frame_count() const { return frames_.size(); }
  double total(int col = 0) const { return total_at(kRoot, col); }
  bool differential() const { return differential_; }
  void set_differential(bool d);

  // Cheap accessors for hot loops (no Node copy). Valid after finalize().
  uint32_t frame_of(uint32_t i) const { return links_[i].frame; }
  uint32_t parent_of(uint32_t i) const { return links_[i].parent; }
  uint32_t first_child(uint32_t i) const { return links_[i].first_child; }
  uint32_t next_sibling(uint32_t i) const { return links_[i].next_sibling; }
  /// Depth of node i (root 0); walks to the root, so O(depth).
  uint32_t depth_of(uint32_t i) const;
  double self_at(uint32_t i, int col = 0) const { return self_[col && differential_ ? 1 : 0][i]; }
  double total_at(uint32_t i, int col = 0) const {
    const detail::BigVector<double>& v = total_[col && differential_ ? 1 : 0];
    return i < v.size() ? v[i] : 0;
  }
  /// Rank of each frame name in sort_children()'s order (computed on demand, cached).
  const std::vector<uint32_t>& frame_ranks() const;

  /// Node reached from the root by `path` (frames separated by ';'), or kNone.
  uint32_t find(std::string_view path) const;
  /// The ';'-joined path from the root to node `i`.
  std::string path(uint32_t i) const;

 private:
  struct Link {
    uint32_t frame, parent, first_child, next_sibling;
  };
  uint32_t new_node(uint32_t parent, uint32_t frame);
  uint32_t lookup_child(uint32_t parent, uint32_t frame) const;
  void index_insert(uint32_t node);
  void index_grow();
  void index_rebuild();
  void grow_frame_index();

  detail::BigVector<Link> links_;
  detail::BigVector<uint8_t> nkids_;  // children per node, saturating at 255
  detail::BigVector<double> self_[2];
  detail::BigVector<double> total_[2];
  // Frame names: the strings callers see, plus a packed copy (one arena,
  // offsets) that interning compares against without chasing pointers.
  std::vector<std::string> frames_;
  std::vector<uint64_t> frame_hash_;
  std::string arena_;
  std::vector<uint32_t> arena_off_;    // frame f is arena_[off[f], off[f+1])
  std::vector<uint32_t> frame_slots_;  // open addressing: frame index or kNone
  // Children of nodes with many children are found through this table,
  // slot = (hash tag << 32 | node), 0 = empty; nodes with few children by
  // walking their list, and nodes with none not at all.
  detail::BigVector<uint64_t> child_slots_;
  std::size_t child_count_ = 0;          // entries in child_slots_
  bool index_valid_ = true;              // false after finalize() freed it
  mutable std::vector<uint32_t> ranks_;  // frame_ranks() cache
  // flow(): the previous stack, the node of each of its frames and where
  // each frame ends in it.
  std::string last_stack_;
  std::vector<uint32_t> last_nodes_;
  std::vector<uint32_t> last_ends_;
  bool differential_ = false;
  bool flamechart_ = false;
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

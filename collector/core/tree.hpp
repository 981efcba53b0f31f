// The collector's call tree and frame table: interned frames, one node per
// distinct call path (a node names its parent), so memory grows with the
// number of distinct stacks, never with the run's length.
//
// One writer (the Lua thread) and one reader (the streamer thread), with no
// lock: storage is in fixed-size blocks that never move, counts are
// published with release stores, and values are relaxed atomics (plain
// moves on x86-64). The reader sees a node only once its parent and frame
// are written.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lfc {

/// Frame names, numbered in order of first sight. Stable storage.
class FrameNames {
 public:
  static constexpr uint32_t kMax =
      1u << 20;  ///< distinct frames kept; later ones share "[luaflame] too many frames"
  FrameNames();
  ~FrameNames();
  /// Appends a name (Lua thread); returns its number.
  uint32_t add(std::string name);
  /// Number of published names (any thread).
  uint32_t size() const { return count_.load(std::memory_order_acquire); }
  const std::string& operator[](uint32_t i) const { return blocks_[i >> kBits][i & kMask]; }
  std::size_t memory_bytes() const { return bytes_; }

 private:
  static constexpr uint32_t kBits = 10, kMask = (1u << kBits) - 1;
  std::unique_ptr<std::string*[]> blocks_;
  std::atomic<uint32_t> count_{0};
  std::size_t bytes_ = 0;
};

/// A tracer's call cache (vm/puc's CallCache, vm/luajit's JTracer): the
/// slot of (callee identity, parent node) in a direct-mapped table of
/// 2^bits entries, a multiply's top bits.
inline std::size_t call_slot(const void* ident, uint32_t parent, int bits) {
  return static_cast<std::size_t>(
      ((reinterpret_cast<std::uintptr_t>(ident) ^ (parent * 0x9e3779b97f4a7c15ull)) *
       0xbf58476d1ce4e5b9ull) >>
      (64 - bits));
}

/// The call tree. Node 0 is the root (no frame).
class Tree {
 public:
  static constexpr uint32_t kNoFrame = 0xffffffffu;
  static constexpr uint32_t kMaxNodes =
      1u << 22;  ///< distinct paths kept; later ones go to an overflow node

  explicit Tree(int nmetrics);
  ~Tree();
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;

  /// The child of `parent` for `frame`, created on first use (Lua thread).
  /// Each node remembers its last child looked up, in a word beside its
  /// values (a line the tracer has just written): a loop calling the same
  /// function again skips the map and its cache miss.
  uint32_t child(uint32_t parent, uint32_t frame);
  /// Adds to a node's self value of metric column `m` (Lua thread).
  void add(uint32_t node, int m, uint64_t v) {
    std::atomic<uint64_t>& a = val(node, m);
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  /// The node's value slots, one per metric column: stable for the
  /// tree's life, so the tracer keeps them and skips the block lookup.
  std::atomic<uint64_t>* slots(uint32_t node) { return &val(node, 0); }
  static void bump(std::atomic<uint64_t>& a, uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  /// Number of published nodes (any thread).
  uint32_t size() const { return count_.load(std::memory_order_acquire); }
  uint32_t parent(uint32_t n) const { return block(n)->parent[n & kMask]; }
  uint32_t frame(uint32_t n) const { return block(n)->frame[n & kMask]; }
  uint64_t value(uint32_t n, int m) const {
    return const_cast<Tree*>(this)->val(n, m).load(std::memory_order_relaxed);
  }
  int nmetrics() const { return nm_; }
  /// The frame used for the overflow node (set by the owner).
  uint32_t overflow_frame = kNoFrame;
  std::size_t memory_bytes() const;

 private:
  static constexpr uint32_t kBits = 12, kMask = (1u << kBits) - 1;
  struct Block {
    uint32_t parent[1u << kBits];
    uint32_t frame[1u << kBits];
    std::unique_ptr<std::atomic<uint64_t>[]> values;
  };
  Block* block(uint32_t n) const { return blocks_[n >> kBits]; }
  // A node's row: its nm_ values, then its last-child word (see child()).
  std::atomic<uint64_t>& val(uint32_t n, int m) {
    return block(n)->values[static_cast<std::size_t>(n & kMask) * (nm_ + 1) + m];
  }
  uint32_t make(uint32_t parent, uint32_t frame);
  uint32_t lookup(uint32_t parent, uint32_t frame);  ///< the map, creating on a miss
  void grow_map();

  int nm_;
  std::unique_ptr<Block*[]> blocks_;
  std::atomic<uint32_t> count_{0};
  uint32_t overflow_node_ = 0;
  // Open-addressing map (parent, frame) -> node; Lua thread only. One
  // 64-bit word per slot (key and node together: one cache miss per probe
  // on the tracer's uncached calls): bits 0-41 parent << 20 | frame, bits
  // 42-63 the node (parents and nodes < kMaxNodes = 2^22, frames < 2^20).
  std::vector<uint64_t> map_;
  std::size_t used_ = 0;
};

}  // namespace lfc

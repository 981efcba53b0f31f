// Call tree and frame names (see tree.hpp for the threading contract).
#include "tree.hpp"

namespace lfc {

namespace {
constexpr uint64_t kEmpty = ~0ull;
constexpr int kFrameBits = 20, kKeyBits = 42;
constexpr uint64_t kKeyMask = (1ull << kKeyBits) - 1;
static_assert(Tree::kMaxNodes <= (1u << (kKeyBits - kFrameBits)) &&
                  FrameNames::kMax <= (1u << kFrameBits),
              "node and frame numbers must fit the map's packed slots");

inline uint64_t key_of(uint32_t parent, uint32_t frame) {
  if (frame >= (1u << kFrameBits))
    frame = (1u << kFrameBits) - 1;  // never: frames are < FrameNames::kMax
  return (static_cast<uint64_t>(parent) << kFrameBits) | frame;
}

inline std::size_t hash_of(uint64_t k) {
  k ^= k >> 29;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 32;
  return static_cast<std::size_t>(k);
}
}  // namespace

FrameNames::FrameNames() : blocks_(new std::string*[(kMax >> kBits) + 1]()) {}

FrameNames::~FrameNames() {
  for (uint32_t b = 0; b <= (kMax >> kBits); ++b) delete[] blocks_[b];
}

uint32_t FrameNames::add(std::string name) {
  uint32_t i = count_.load(std::memory_order_relaxed);
  if (i >= kMax) return kMax - 1;  // the last one, named by the owner as the overflow frame
  if (!blocks_[i >> kBits]) {
    blocks_[i >> kBits] = new std::string[1u << kBits];
    bytes_ += sizeof(std::string) << kBits;
  }
  bytes_ += name.capacity() > 15 ? name.capacity() + 1 : 0;
  blocks_[i >> kBits][i & kMask] = std::move(name);
  count_.store(i + 1, std::memory_order_release);
  return i;
}

Tree::Tree(int nmetrics)
    : nm_(nmetrics > 0 ? nmetrics : 1), blocks_(new Block*[(kMaxNodes >> kBits) + 1]()) {
  map_.assign(1024, kEmpty);
  make(0, kNoFrame);  // the root
}

Tree::~Tree() {
  for (uint32_t b = 0; b <= (kMaxNodes >> kBits); ++b) delete blocks_[b];
}

uint32_t Tree::make(uint32_t parent, uint32_t frame) {
  uint32_t i = count_.load(std::memory_order_relaxed);
  Block*& b = blocks_[i >> kBits];
  if (!b) {
    b = new Block;
    b->values.reset(new std::atomic<uint64_t>[static_cast<std::size_t>(nm_ + 1) << kBits]());
  }
  b->parent[i & kMask] = parent;
  b->frame[i & kMask] = frame;
  count_.store(i + 1, std::memory_order_release);
  return i;
}

void Tree::grow_map() {
  std::vector<uint64_t> map(map_.size() * 2, kEmpty);
  const std::size_t mask = map.size() - 1;
  for (uint64_t slot : map_) {
    if (slot == kEmpty) continue;
    std::size_t h = hash_of(slot & kKeyMask) & mask;
    while (map[h] != kEmpty) h = (h + 1) & mask;
    map[h] = slot;
  }
  map_.swap(map);
}

uint32_t Tree::child(uint32_t parent, uint32_t frame) {
  // The parent's last child: frame in bits 0-19, node above (0: none yet;
  // a child is never node 0). Only this thread reads or writes the word.
  std::atomic<uint64_t>& last = val(parent, nm_);
  const uint64_t w = last.load(std::memory_order_relaxed);
  const uint64_t fbits = frame < (1u << kFrameBits) ? frame : (1u << kFrameBits) - 1;
  if (w && (w & ((1u << kFrameBits) - 1)) == fbits) return static_cast<uint32_t>(w >> kFrameBits);
  const uint32_t node = lookup(parent, frame);
  last.store(fbits | (static_cast<uint64_t>(node) << kFrameBits), std::memory_order_relaxed);
  return node;
}

uint32_t Tree::lookup(uint32_t parent, uint32_t frame) {
  const uint64_t k = key_of(parent, frame);
  const std::size_t mask = map_.size() - 1;
  std::size_t h = hash_of(k) & mask;
  for (uint64_t slot; (slot = map_[h]) != kEmpty; h = (h + 1) & mask)
    if ((slot & kKeyMask) == k) return static_cast<uint32_t>(slot >> kKeyBits);
  if (count_.load(std::memory_order_relaxed) >= kMaxNodes - 1) {
    // Out of room: everything new lands in one overflow node under the root.
    if (!overflow_node_) overflow_node_ = make(0, overflow_frame);
    return overflow_node_;
  }
  uint32_t node = make(parent, frame);
  map_[h] = k | (static_cast<uint64_t>(node) << kKeyBits);
  if (++used_ * 2 > map_.size()) grow_map();
  return node;
}

std::size_t Tree::memory_bytes() const {
  std::size_t blocks = (size() >> kBits) + 1;
  return blocks * (sizeof(Block) + (static_cast<std::size_t>(nm_ + 1) << kBits) * 8) +
         map_.capacity() * 8 + ((kMaxNodes >> kBits) + 1) * sizeof(void*);
}

}  // namespace lfc

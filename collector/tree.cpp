// Call tree and frame names (see tree.hpp for the threading contract).
#include "tree.hpp"

namespace lfc {

namespace {
constexpr uint64_t kEmpty = ~0ull;

inline uint64_t key_of(uint32_t parent, uint32_t frame) {
  return (static_cast<uint64_t>(parent) << 32) | frame;
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
  keys_.assign(1024, kEmpty);
  slots_.assign(1024, 0);
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
    b->values.reset(new std::atomic<uint64_t>[static_cast<std::size_t>(nm_) << kBits]());
  }
  b->parent[i & kMask] = parent;
  b->frame[i & kMask] = frame;
  count_.store(i + 1, std::memory_order_release);
  return i;
}

void Tree::grow_map() {
  std::vector<uint64_t> keys(keys_.size() * 2, kEmpty);
  std::vector<uint32_t> slots(keys.size(), 0);
  const std::size_t mask = keys.size() - 1;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == kEmpty) continue;
    std::size_t h = hash_of(keys_[i]) & mask;
    while (keys[h] != kEmpty) h = (h + 1) & mask;
    keys[h] = keys_[i];
    slots[h] = slots_[i];
  }
  keys_.swap(keys);
  slots_.swap(slots);
}

uint32_t Tree::child(uint32_t parent, uint32_t frame) {
  const uint64_t k = key_of(parent, frame);
  std::size_t mask = keys_.size() - 1;
  std::size_t h = hash_of(k) & mask;
  while (keys_[h] != kEmpty) {
    if (keys_[h] == k) return slots_[h];
    h = (h + 1) & mask;
  }
  if (count_.load(std::memory_order_relaxed) >= kMaxNodes - 1) {
    // Out of room: everything new lands in one overflow node under the root.
    if (!overflow_node_) overflow_node_ = make(0, overflow_frame);
    return overflow_node_;
  }
  uint32_t node = make(parent, frame);
  keys_[h] = k;
  slots_[h] = node;
  if (++used_ * 2 > keys_.size()) grow_map();
  return node;
}

std::size_t Tree::memory_bytes() const {
  std::size_t blocks = (size() >> kBits) + 1;
  return blocks * (sizeof(Block) + (static_cast<std::size_t>(nm_) << kBits) * 8) +
         keys_.capacity() * 8 + slots_.capacity() * 4 + ((kMaxNodes >> kBits) + 1) * sizeof(void*);
}

}  // namespace lfc

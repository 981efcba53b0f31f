// engine, stage 2: the call tree.
//
// Nodes live in columns (links, child counts, self, total) rather than as fat
// structs: a 200,000-stack profile has millions of nodes and the bytes per
// node decide the peak memory. Children are found through one open-addressing
// table keyed by (parent, frame); consecutive stacks sharing a prefix skip
// even that (see add()).
#include <sys/mman.h>
#include <algorithm>

#include <cstring>
#include <new>
#include <numeric>

#include "luaflame/tree.hpp"
#include "walk.hpp"

namespace lf {

namespace {
constexpr std::size_t kBigBytes = std::size_t(4) << 20;
}  // namespace

void* detail::big_alloc(std::size_t bytes) {
  if (bytes < kBigBytes) return ::operator new(bytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void detail::big_free(void* p, std::size_t bytes) {
  if (bytes < kBigBytes)
    ::operator delete(p);
  else
    ::munmap(p, bytes);
}

using detail::hash_bytes;
using detail::hash_pair;

namespace {
constexpr uint8_t kWide = 4;  // from this many children on, a node's children are indexed
}  // namespace

Tree::Tree() {
  arena_off_.push_back(0);
  intern("all");  // frame 0: the root's name, as flamegraph.pl calls it
  new_node(kNone, 0);
}

void Tree::reserve(std::size_t nodes) {
  links_.reserve(nodes);
  nkids_.reserve(nodes);
  self_[0].reserve(nodes);
  if (differential_) self_[1].reserve(nodes);
}

void Tree::set_differential(bool d) {
  if (d && !differential_) self_[1].assign(links_.size(), 0.0);
  if (!d) {
    self_[1].clear();
    total_[1].clear();
  }
  differential_ = d;
}

// ---- frame names -----------------------------------------------------------

void Tree::grow_frame_index() {
  std::size_t cap = std::max<std::size_t>(64, frame_slots_.size() * 2);
  frame_slots_.assign(cap, kNone);
  std::size_t mask = cap - 1;
  for (uint32_t f = 0; f < frames_.size(); ++f) {
    std::size_t i = frame_hash_[f] & mask;
    while (frame_slots_[i] != kNone) i = (i + 1) & mask;
    frame_slots_[i] = f;
  }
}

uint32_t Tree::intern(std::string_view name) {
  if ((frames_.size() + 1) * 2 > frame_slots_.size()) grow_frame_index();
  uint64_t h = hash_bytes(name.data(), name.size());
  std::size_t mask = frame_slots_.size() - 1;
  const char* arena = arena_.data();
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t f = frame_slots_[i];
    if (f == kNone) {
      f = uint32_t(frames_.size());
      frames_.emplace_back(name);
      frame_hash_.push_back(h);
      arena_.append(name.data(), name.size());
      arena_off_.push_back(uint32_t(arena_.size()));
      frame_slots_[i] = f;
      return f;
    }
    if (frame_hash_[f] == h && arena_off_[f + 1] - arena_off_[f] == name.size() &&
        std::memcmp(arena + arena_off_[f], name.data(), name.size()) == 0)
      return f;
  }
}

const std::vector<uint32_t>& Tree::frame_ranks() const {
  if (ranks_.size() != frames_.size()) {
    std::vector<uint32_t> order(frames_.size());
    std::iota(order.begin(), order.end(), 0u);
    // flamegraph.pl sorts whole lines, where a frame name is followed by
    // ';' (or the count): so "f a.lua:12" comes before "f a.lua:1" ('2' <
    // ';'). Compare names as if each ended in ';'.
    std::sort(order.begin(), order.end(), [this](uint32_t ia, uint32_t ib) {
      const std::string& a = frames_[ia];
      const std::string& b = frames_[ib];
      std::size_t n = std::min(a.size(), b.size());
      int c = std::memcmp(a.data(), b.data(), n);
      if (c != 0) return c < 0;
      if (a.size() == b.size()) return false;
      if (a.size() < b.size()) return static_cast<unsigned char>(b[n]) > ';' || b[n] == ';';
      return static_cast<unsigned char>(a[n]) < ';';
    });
    ranks_.assign(frames_.size(), 0);
    for (uint32_t r = 0; r < order.size(); ++r) ranks_[order[r]] = r;
  }
  return ranks_;
}

// ---- nodes -----------------------------------------------------------------

void Tree::index_insert(uint32_t node) {
  uint64_t h = hash_pair(links_[node].parent, links_[node].frame);
  uint64_t slot = (h & 0xFFFFFFFF00000000ull) | node;  // never 0: the root is nobody's child
  std::size_t mask = child_slots_.size() - 1;
  std::size_t i = h & mask;
  while (child_slots_[i]) i = (i + 1) & mask;
  child_slots_[i] = slot;
  ++child_count_;
}

void Tree::index_grow() {
  detail::BigVector<uint64_t> old;
  old.swap(child_slots_);
  child_slots_.assign(std::max<std::size_t>(1024, old.size() * 2), 0);
  child_count_ = 0;
  for (uint64_t s : old)
    if (s) index_insert(uint32_t(s));
}

// After finalize() freed the table: index again the children of every
// node that has many.
void Tree::index_rebuild() {
  child_slots_.assign(1024, 0);
  child_count_ = 0;
  index_valid_ = true;
  for (uint32_t n = 1; n < links_.size(); ++n) {
    if (nkids_[links_[n].parent] < kWide) continue;
    if ((child_count_ + 1) * 2 > child_slots_.size()) index_grow();
    index_insert(n);
  }
}

uint32_t Tree::lookup_child(uint32_t parent, uint32_t frame) const {
  if (nkids_[parent] < kWide) {
    for (uint32_t c = links_[parent].first_child; c != kNone; c = links_[c].next_sibling)
      if (links_[c].frame == frame) return c;
    return kNone;
  }
  uint64_t h = hash_pair(parent, frame);
  uint64_t tag = h & 0xFFFFFFFF00000000ull;
  std::size_t mask = child_slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    uint64_t s = child_slots_[i];
    if (!s) return kNone;
    if ((s & 0xFFFFFFFF00000000ull) != tag) continue;
    const Link& l = links_[uint32_t(s)];
    if (l.parent == parent && l.frame == frame) return uint32_t(s);
  }
}

uint32_t Tree::new_node(uint32_t parent, uint32_t frame) {
  uint32_t n = uint32_t(links_.size());
  Link l{frame, parent, kNone, kNone};
  if (parent != kNone) {
    // Prepend while building; finalize() relinks in creation order.
    l.next_sibling = links_[parent].first_child;
    links_[parent].first_child = n;
  }
  links_.push_back(l);
  nkids_.push_back(0);
  self_[0].push_back(0);
  if (differential_) self_[1].push_back(0);
  if (parent != kNone) {
    uint8_t k = nkids_[parent];
    if (k < 255) nkids_[parent] = ++k;
    if (k >= kWide && index_valid_) {
      if (child_slots_.empty() || (child_count_ + kWide + 1) * 2 > child_slots_.size())
        index_grow();
      if (k == kWide) {
        for (uint32_t c = links_[parent].first_child; c != kNone; c = links_[c].next_sibling)
          index_insert(c);
      } else {
        index_insert(n);
      }
    }
  }
  return n;
}

uint32_t Tree::child(uint32_t parent, uint32_t frame) {
  if (!index_valid_) index_rebuild();
  if (links_[parent].first_child != kNone) {
    uint32_t n = lookup_child(parent, frame);
    if (n != kNone) return n;
  }
  return new_node(parent, frame);
}

void Tree::add_self(uint32_t i, double value, int col) {
  if (col && !differential_) set_differential(true);
  self_[col ? 1 : 0][i] += value;
}

// flamegraph.pl's flow(): the frames this stack shares with the previous one
// (whole frames of a common byte prefix) are the same nodes, found without
// hashing. Sorted input shares long prefixes, so most frames cost a memcmp.
void Tree::add(std::string_view stack, double value, int col) {
  const char* s = stack.data();
  std::size_t n = stack.size();
  std::size_t m = std::min(n, last_stack_.size());
  const char* l = last_stack_.data();
  std::size_t common = 0;
  while (common + 8 <= m && std::memcmp(s + common, l + common, 8) == 0) common += 8;
  while (common < m && s[common] == l[common]) ++common;

  std::size_t k = 0;
  while (k < last_ends_.size()) {
    std::size_t e = last_ends_[k];
    if (e > common || (e != n && s[e] != ';')) break;
    ++k;
  }
  if (n == 0) k = 0;
  last_nodes_.resize(k);
  last_ends_.resize(k);
  uint32_t node = k ? last_nodes_[k - 1] : kRoot;
  if (n > 0 && (k == 0 || last_ends_[k - 1] < n)) {
    std::size_t pos = k ? last_ends_[k - 1] + 1 : 0;
    bool fresh = false;
    if (!index_valid_) index_rebuild();
    for (;;) {
      const char* stop = detail::find_semi(s + pos, s + n);
      const char* semi = stop < s + n ? stop : nullptr;
      std::size_t e = std::size_t(stop - s);
      uint32_t f = intern(std::string_view(s + pos, e - pos));
      // A node made just now has no children to search.
      node = flamechart_ || fresh ? new_node(node, f) : child(node, f);
      fresh = fresh || uint32_t(links_.size()) - 1 == node;
      last_nodes_.push_back(node);
      last_ends_.push_back(uint32_t(e));
      if (!semi) break;
      pos = e + 1;
    }
  }
  last_stack_.assign(s, n);
  add_self(node, value, col);
}

void Tree::add(const FoldedLine& line) {
  if (line.differential && !differential_) {
    // Lines read so far had one column: they count the same before and after.
    set_differential(true);
    self_[1] = self_[0];
  }
  if (line.differential) {
    add(line.stack, line.value, 0);
    self_[1][last_nodes_.empty() ? kRoot : last_nodes_.back()] += line.value2;
  } else {
    add(line.stack, line.value, 0);
    if (differential_) self_[1][last_nodes_.empty() ? kRoot : last_nodes_.back()] += line.value;
  }
}

void Tree::finalize() {
  std::size_t n = links_.size();
  // The child index is only needed while adding; free it (child() rebuilds).
  detail::BigVector<uint64_t>().swap(child_slots_);
  child_count_ = 0;
  index_valid_ = false;
  for (Link& l : links_) l.first_child = l.next_sibling = kNone;
  // Children are created after their parents: prepending from the last node
  // down leaves every list in creation order.
  for (std::size_t i = n; i-- > 1;) {
    Link& l = links_[i];
    l.next_sibling = links_[l.parent].first_child;
    links_[l.parent].first_child = uint32_t(i);
  }
  for (int c = 0; c < (differential_ ? 2 : 1); ++c) {
    total_[c] = self_[c];
    detail::BigVector<double>& t = total_[c];
    for (std::size_t i = n; i-- > 1;) t[links_[i].parent] += t[i];
  }
}

void Tree::sort_children() {
  const std::vector<uint32_t>& rank = frame_ranks();
  std::vector<uint32_t> kids;
  for (uint32_t p = 0; p < links_.size(); ++p) {
    uint32_t c = links_[p].first_child;
    if (c == kNone || links_[c].next_sibling == kNone) continue;
    bool sorted = true;
    kids.clear();
    for (; c != kNone; c = links_[c].next_sibling) {
      if (!kids.empty() && rank[links_[kids.back()].frame] > rank[links_[c].frame]) sorted = false;
      kids.push_back(c);
    }
    if (sorted) continue;
    std::stable_sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
      return rank[links_[a].frame] < rank[links_[b].frame];
    });
    links_[p].first_child = kids[0];
    for (std::size_t i = 0; i + 1 < kids.size(); ++i) links_[kids[i]].next_sibling = kids[i + 1];
    links_[kids.back()].next_sibling = kNone;
  }
}

Tree::Node Tree::node(uint32_t i) const {
  Node n;
  const Link& l = links_[i];
  n.frame = l.frame;
  n.parent = l.parent;
  n.first_child = l.first_child;
  n.next_sibling = l.next_sibling;
  n.depth = depth_of(i);
  for (int c = 0; c < 2; ++c) {
    n.self[c] = self_at(i, c);
    n.total[c] = total_at(i, c);
  }
  return n;
}

uint32_t Tree::depth_of(uint32_t i) const {
  uint32_t d = 0;
  for (; i != kRoot && i != kNone; i = links_[i].parent) ++d;
  return d;
}

uint32_t Tree::find(std::string_view path) const {
  uint32_t node = kRoot;
  if (path.empty()) return node;
  for (std::string_view name : split_stack(path)) {
    uint32_t c = links_[node].first_child;
    while (c != kNone && frames_[links_[c].frame] != name) c = links_[c].next_sibling;
    if (c == kNone) return kNone;
    node = c;
  }
  return node;
}

std::string Tree::path(uint32_t i) const {
  std::vector<uint32_t> chain;
  for (; i != kRoot && i != kNone; i = links_[i].parent) chain.push_back(i);
  std::string out;
  for (std::size_t k = chain.size(); k-- > 0;) {
    out += frames_[links_[chain[k]].frame];
    if (k) out += ';';
  }
  return out;
}

// ---- summaries -------------------------------------------------------------

std::vector<FunctionStat> function_stats(const Tree& tree, int col) {
  std::size_t nf = tree.frame_count();
  std::vector<double> self(nf, 0), total(nf, 0);
  std::vector<uint32_t> open(nf, 0);  // how often each frame is on the current path
  std::vector<char> seen(nf, 0);
  detail::walk(
      tree,
      [&](uint32_t i) {
        if (i == Tree::kRoot) return true;
        uint32_t f = tree.frame_of(i);
        seen[f] = 1;
        self[f] += tree.self_at(i, col);
        // Recursion: count a function's total once per stack.
        if (open[f]++ == 0) total[f] += tree.total_at(i, col);
        return true;
      },
      [&](uint32_t i) {
        if (i != Tree::kRoot) --open[tree.frame_of(i)];
      });
  std::vector<FunctionStat> out;
  for (uint32_t f = 0; f < nf; ++f)
    if (seen[f]) out.push_back({tree.frame_name(f), self[f], total[f]});
  std::sort(out.begin(), out.end(), [](const FunctionStat& a, const FunctionStat& b) {
    if (a.self != b.self) return a.self > b.self;
    if (a.total != b.total) return a.total > b.total;
    return a.name < b.name;
  });
  return out;
}

void write_folded(const Tree& tree, std::string& out) {
  std::string path;
  std::vector<std::size_t> mark;  // path length before each open node
  bool two = tree.differential();
  detail::walk(
      tree,
      [&](uint32_t i) {
        if (i == Tree::kRoot) {
          // Counts of empty stacks (flamegraph.pl puts them on the root): " N".
          double a = tree.self_at(i, 0), b = two ? tree.self_at(i, 1) : 0;
          if (a != 0 || b != 0) {
            out += ' ';
            append_count(out, a);
            if (two) {
              out += ' ';
              append_count(out, b);
            }
            out += '\n';
          }
          return true;
        }
        mark.push_back(path.size());
        if (tree.parent_of(i) != Tree::kRoot) path += ';';
        path += tree.frame_name(tree.frame_of(i));
        double a = tree.self_at(i, 0), b = two ? tree.self_at(i, 1) : 0;
        if (a != 0 || b != 0) {
          out += path;
          out += ' ';
          append_count(out, a);
          if (two) {
            out += ' ';
            append_count(out, b);
          }
          out += '\n';
        }
        return true;
      },
      [&](uint32_t i) {
        if (i == Tree::kRoot) return;
        path.resize(mark.back());
        mark.pop_back();
      });
}

}  // namespace lf

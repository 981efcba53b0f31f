// Building and storing call trees without a string per stack, shared by every Store
// implementation and by the ingest code:
//  - BatchBuilder interns frames and (parent, frame) nodes while a body is parsed;
//  - RunTree is a run's frame and node dictionary, mapping a batch's nodes to the run's ids;
//  - the value codec packs a bucket's (node id, value) pairs into one compact blob;
//  - cover() plans which buckets of which resolution a time range reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.hpp"

namespace lfs {

/// An open-addressing table of 32-bit ids, hashed and compared by the caller
/// (the keys live elsewhere: a batch's frames or nodes), so it costs 8 bytes per entry.
class IdTable {
 public:
  static constexpr uint32_t kEmpty = 0xffffffffu;
  /// The id whose key equals (eq(id)) the probed one with hash `h`, or kEmpty.
  template <class Eq>
  uint32_t find(uint64_t h, Eq&& eq) const {
    if (slots_.empty()) return kEmpty;
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == kEmpty) return kEmpty;
      if (eq(slots_[i])) return slots_[i];
    }
  }
  /// Inserts `id` (not present) with hash `h`; rehash(id) gives the hash of any stored id.
  template <class Rehash>
  void insert(uint64_t h, uint32_t id, Rehash&& rehash) {
    if ((count_ + 1) * 2 > slots_.size()) grow(rehash);
    std::size_t i = h & mask_;
    while (slots_[i] != kEmpty) i = (i + 1) & mask_;
    slots_[i] = id;
    ++count_;
  }
  std::size_t bytes() const { return slots_.capacity() * sizeof(uint32_t); }

 private:
  template <class Rehash>
  void grow(Rehash&& rehash) {
    std::vector<uint32_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, kEmpty);
    mask_ = slots_.size() - 1;
    for (uint32_t id : old) {
      if (id == kEmpty) continue;
      std::size_t i = rehash(id) & mask_;
      while (slots_[i] != kEmpty) i = (i + 1) & mask_;
      slots_[i] = id;
    }
  }
  std::vector<uint32_t> slots_;
  std::size_t mask_ = 0, count_ = 0;
};

uint64_t hash_bytes(std::string_view s);
inline uint64_t hash_node(int32_t parent, uint32_t frame) {
  uint64_t x = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | frame;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/// Fills a Batch as a tree: frames and nodes interned, values added with checked sums.
/// Set batch.metrics before the first node.
class BatchBuilder {
 public:
  explicit BatchBuilder(Batch& b) : b_(b) {}
  uint32_t frame(std::string_view name);
  /// The node for `frame` under `parent` (-1: a root frame), created when new.
  int32_t child(int32_t parent, uint32_t frame);
  /// Adds `v` (>= 0) to the self value of `node` in column `col`; ValueError on overflow.
  void add(int32_t node, std::size_t col, int64_t v);
  /// The node of a folded stack "a;b;c" (frames not checked: for tests and trusted input).
  int32_t path(std::string_view stack);

 private:
  Batch& b_;
  IdTable frames_, nodes_;
};

/// A run's dictionary: its frames and nodes by id, and which nodes ever had a value.
/// The store keeps one per live run in memory and persists what map() added.
class RunTree {
 public:
  std::vector<std::string> frames;
  std::vector<Batch::Node> nodes;
  std::vector<uint8_t> valued;  ///< per node: ever had a non-zero value (a "stack")
  int64_t stack_count = 0;

  void add_frame(std::string name);
  void add_node(int32_t parent, uint32_t frame);
  /// Maps every node of `b` to the run's node id (node_of), adding frames and nodes the run
  /// lacks (from frames.size() / nodes.size() before the call on) and counting new stacks.
  /// LimitError past max_stacks stacks or 8 * max_stacks nodes (the tree is then half
  /// updated: the caller drops it and reloads). `owner`, when given, is `b` itself, which
  /// its caller will not read again: new frame names are moved out of it, not copied.
  void map(const Batch& b, std::size_t max_stacks, std::vector<uint32_t>& node_of,
           Batch* owner = nullptr);
  std::size_t bytes() const;

 private:
  IdTable frame_ids_, node_ids_;
};

/// "a;b;c": the folded text of stored node `id` (for tests and exports; reads use the tree).
std::string path_text(const StoredTree& t, uint32_t id);

/// Frames as stored: names joined by '\n' (no frame holds one), from `from` on until the
/// next would take `out` past `max_bytes` (one frame at least); returns the index after the last.
std::size_t encode_frames(const std::vector<std::string>& frames, std::size_t from,
                          std::string& out, std::size_t max_bytes = SIZE_MAX);
void decode_frames(std::string_view blob, std::vector<std::string>& out);
/// Nodes as stored: varint(parent + 1) varint(frame) per node.
void encode_nodes(const std::vector<Batch::Node>& nodes, std::size_t from, std::string& out);
/// false when malformed.
bool decode_nodes(std::string_view blob, std::vector<Batch::Node>& out);

/// (node id, value) pairs, ascending ids, values != 0.
using Values = std::vector<std::pair<uint32_t, int64_t>>;
/// A bucket's blob: varint(id delta) varint(value) per pair.
void encode_values(const Values& v, std::string& out);
/// Adds the blob's pairs into `into` (sorted, merged; checked sums). false when malformed.
bool merge_blob(std::string_view blob, Values& into, int sign = 1);
/// Adds a blob's pairs into a dense per-node array (reads: one pass, no sorting).
bool add_blob(std::string_view blob, std::vector<int64_t>& dense);
/// Merges sorted `add` into sorted `into` (checked sums; sign -1 subtracts, zeros dropped).
void merge_values(Values& into, const Values& add, int sign = 1);

// ---- Merging a batch into stored buckets: the one place both stores do it ----

/// Throws when `b` is malformed (values not nodes x metrics, a node naming no frame).
void check_batch(const Batch& b);
/// Column `c` of `b` as (run node id, value) pairs (node_of from RunTree::map), sorted, repeats
/// of one run node merged (a batch may name a (parent, frame) pair twice); returns their sum.
/// ValueError on a negative value or a sum past int64.
int64_t column_values(const Batch& b, std::size_t c, const std::vector<uint32_t>& node_of,
                      Values& vals);
/// A stored bucket (blob `old`, "" when there is none) with `add` added (sign 1) or subtracted
/// (-1), re-encoded into `out`; false when the result is empty (the bucket is to be deleted).
/// Throws on a malformed blob (naming `run`) or a sum that does not fit.
bool merged_bucket(std::string_view old, const Values& add, int sign, int64_t run,
                   std::string& out);
/// A bucket is stored as parts (issue 11): a chunk appends its own values as a new part, and
/// the newest parts are merged only while they are not much smaller than what joins them, so
/// appending costs about the chunk (amortized), not the bucket, and a bucket keeps a few parts
/// (at most kMaxParts). Reads add the parts up (they sum into one dense array anyway).
constexpr std::size_t kMaxParts = 8;
/// How many of the newest stored parts (byte sizes `parts`, oldest first) to merge with a new
/// part of `fresh` bytes: while the next older part is at most twice what is merged so far,
/// and while more than kMaxParts - 1 would be left.
std::size_t parts_to_merge(const std::vector<int64_t>& parts, int64_t fresh);
/// A bucket total after adding (sign 1, checked) or subtracting (-1) `sum`.
int64_t merged_total(int64_t total, int64_t sum, int sign);
/// What retention takes out of one (run, metric)'s merged tree and totals: the summed
/// values of its dropped coarsest buckets.
struct Removed {
  int64_t run = 0;
  int metric = 0;
  int64_t sum = 0;
  Values v;
};
/// Adds one dropped bucket to `out` (buckets come in (run, metric) order). Throws when malformed.
void add_removed(std::vector<Removed>& out, int64_t run, int metric, int64_t total,
                 std::string_view blob);

/// One piece of a range: the buckets of resolution `level` starting in [lo, hi).
struct Piece {
  int level = 0;
  int64_t lo = 0, hi = 0;
};
/// The buckets that cover [from, until): the coarsest that fit inside, finer ones at the
/// edges. horizon[L]: the first bucket start level L still holds (buckets before it were
/// dropped; INT64_MAX when it holds none); where a finer level lacks an edge, the coarser
/// bucket holding it is taken whole.
std::vector<Piece> cover(int64_t from, int64_t until, const std::vector<Resolution>& res,
                         const std::vector<int64_t>& horizon);

/// The buckets a timeline of [from, until) at `step` reads, newest first (the policy both
/// stores follow; each reads a piece's bucket sums newest first, then reverses the whole):
/// the finest level no wider than the step that holds data, then, before each level's
/// horizon, the next coarser level's buckets up to that horizon rounded to its width.
std::vector<Piece> timeline_pieces(int64_t from, int64_t until, int64_t step,
                                   const std::vector<Resolution>& res,
                                   const std::vector<int64_t>& horizon);

/// One resolution's part of a retention pass at `now` (the policy both stores follow): its
/// buckets that start before `cutoff` ended more than its keep ago and go; the coarsest
/// level's also leave the run's merged tree and totals, so the whole-run view is what is kept.
/// Levels kept forever (keep 0) have none.
struct TrimStep {
  int64_t width_ns = 0, cutoff = 0;
  bool coarsest = false;
};
std::vector<TrimStep> trim_steps(const std::vector<Resolution>& res, int64_t now_ns);

/// Floor of a bucket start for `t` at width `w` (also for negative t).
inline int64_t bucket_of(int64_t t, int64_t w) {
  int64_t q = t / w;
  if (t % w < 0) --q;
  return q * w;
}

}  // namespace lfs

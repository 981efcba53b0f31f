// Call trees without a string per stack (see batch.hpp).
#include "store/batch.hpp"

#include <algorithm>
#include <limits>

namespace lfs {

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, then a final mix for the low bits
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h ^ (h >> 29);
}

uint32_t BatchBuilder::frame(std::string_view name) {
  const uint64_t h = hash_bytes(name);
  uint32_t id = frames_.find(h, [&](uint32_t i) { return b_.frames[i] == name; });
  if (id != IdTable::kEmpty) return id;
  id = static_cast<uint32_t>(b_.frames.size());
  b_.frames.emplace_back(name);
  frames_.insert(h, id, [&](uint32_t i) { return hash_bytes(b_.frames[i]); });
  return id;
}

int32_t BatchBuilder::child(int32_t parent, uint32_t frame) {
  const uint64_t h = hash_node(parent, frame);
  uint32_t id = nodes_.find(
      h, [&](uint32_t i) { return b_.nodes[i].parent == parent && b_.nodes[i].frame == frame; });
  if (id != IdTable::kEmpty) return static_cast<int32_t>(id);
  id = static_cast<uint32_t>(b_.nodes.size());
  b_.nodes.push_back({parent, frame});
  b_.values.resize(b_.values.size() + b_.metrics.size(), 0);
  nodes_.insert(h, id,
                [&](uint32_t i) { return hash_node(b_.nodes[i].parent, b_.nodes[i].frame); });
  return static_cast<int32_t>(id);
}

void BatchBuilder::add(int32_t node, std::size_t col, int64_t v) {
  int64_t& slot = b_.values[static_cast<std::size_t>(node) * b_.metrics.size() + col];
  slot = checked_add(slot, v, "a stack's value");
}

int32_t BatchBuilder::path(std::string_view stack) {
  int32_t node = -1;
  std::size_t pos = 0;
  while (pos <= stack.size()) {
    std::size_t semi = std::min(stack.find(';', pos), stack.size());
    node = child(node, frame(stack.substr(pos, semi - pos)));
    pos = semi + 1;
  }
  return node;
}

std::string path_text(const StoredTree& t, uint32_t id) {
  std::vector<uint32_t> frames;
  for (int64_t n = id; n >= 0; n = t.nodes[static_cast<std::size_t>(n)].parent)
    frames.push_back(t.nodes[static_cast<std::size_t>(n)].frame);
  std::string out;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!out.empty()) out += ';';
    out += t.frames[*it];
  }
  return out;
}

void RunTree::add_frame(std::string name) {
  const uint64_t h = hash_bytes(name);
  const auto id = static_cast<uint32_t>(frames.size());
  frames.push_back(std::move(name));
  frame_ids_.insert(h, id, [&](uint32_t i) { return hash_bytes(frames[i]); });
}

void RunTree::add_node(int32_t parent, uint32_t frame) {
  const auto id = static_cast<uint32_t>(nodes.size());
  nodes.push_back({parent, frame});
  valued.push_back(0);
  node_ids_.insert(hash_node(parent, frame), id,
                   [&](uint32_t i) { return hash_node(nodes[i].parent, nodes[i].frame); });
}

void RunTree::map(const Batch& b, std::size_t max_stacks, std::vector<uint32_t>& node_of,
                  Batch* owner) {
  std::vector<uint32_t> frame_of(b.frames.size());
  for (std::size_t i = 0; i < b.frames.size(); ++i) {
    const std::string& name = b.frames[i];
    uint32_t id = frame_ids_.find(hash_bytes(name), [&](uint32_t f) { return frames[f] == name; });
    if (id == IdTable::kEmpty) {
      id = static_cast<uint32_t>(frames.size());
      if (owner == &b)
        add_frame(std::move(owner->frames[i]));
      else
        add_frame(name);
    }
    frame_of[i] = id;
  }
  const std::size_t cols = b.metrics.size();
  node_of.resize(b.nodes.size());
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    const Batch::Node& n = b.nodes[i];
    const int32_t parent =
        n.parent < 0 ? -1 : static_cast<int32_t>(node_of[static_cast<std::size_t>(n.parent)]);
    const uint32_t frame = frame_of[n.frame];
    uint32_t id = node_ids_.find(hash_node(parent, frame), [&](uint32_t k) {
      return nodes[k].parent == parent && nodes[k].frame == frame;
    });
    if (id == IdTable::kEmpty) {
      if (nodes.size() >= 8 * max_stacks)
        throw LimitError("a run holds at most " + std::to_string(8 * max_stacks) +
                         " call-tree nodes");
      id = static_cast<uint32_t>(nodes.size());
      add_node(parent, frame);
    }
    node_of[i] = id;
    if (valued[id]) continue;
    for (std::size_t c = 0; c < cols; ++c)
      if (b.values[i * cols + c] != 0) {
        valued[id] = 1;
        if (static_cast<std::size_t>(++stack_count) > max_stacks)
          throw LimitError("a run holds at most " + std::to_string(max_stacks) +
                           " distinct stacks");
        break;
      }
  }
}

std::size_t RunTree::bytes() const {
  std::size_t n = nodes.capacity() * sizeof(Batch::Node) + valued.capacity() + frame_ids_.bytes() +
                  node_ids_.bytes();
  for (const std::string& f : frames) n += sizeof(std::string) + f.capacity();
  return n;
}

namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// Reads one varint at p (< end); false when truncated or too long.
bool get_varint(const unsigned char*& p, const unsigned char* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    unsigned char c = *p++;
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

// Zigzag: values are >= 0 in buckets, but a subtraction's result is checked, not trusted.
uint64_t zig(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t zag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

template <class Fn>
bool each_pair(std::string_view blob, Fn&& fn) {
  auto p = reinterpret_cast<const unsigned char*>(blob.data());
  auto end = p + blob.size();
  uint64_t id = 0, delta = 0, v = 0;
  bool first = true;
  while (p < end) {
    if (!get_varint(p, end, delta) || !get_varint(p, end, v)) return false;
    id = first ? delta : id + delta;
    first = false;
    if (id > 0xffffffffull) return false;
    fn(static_cast<uint32_t>(id), zag(v));
  }
  return true;
}

}  // namespace

std::size_t encode_frames(const std::vector<std::string>& frames, std::size_t from,
                          std::string& out, std::size_t max_bytes) {
  std::size_t i = from;
  for (; i < frames.size(); ++i) {
    if (i > from && out.size() + 1 + frames[i].size() > max_bytes) break;
    if (i > from) out += '\n';
    out += frames[i];
  }
  return i;
}

void decode_frames(std::string_view blob, std::vector<std::string>& out) {
  std::size_t pos = 0;
  while (true) {
    std::size_t nl = blob.find('\n', pos);
    out.emplace_back(
        blob.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (nl == std::string_view::npos) return;
    pos = nl + 1;
  }
}

void encode_nodes(const std::vector<Batch::Node>& nodes, std::size_t from, std::string& out) {
  for (std::size_t i = from; i < nodes.size(); ++i) {
    put_varint(out, static_cast<uint64_t>(static_cast<int64_t>(nodes[i].parent) + 1));
    put_varint(out, nodes[i].frame);
  }
}

bool decode_nodes(std::string_view blob, std::vector<Batch::Node>& out) {
  auto p = reinterpret_cast<const unsigned char*>(blob.data());
  auto end = p + blob.size();
  uint64_t parent = 0, frame = 0;
  while (p < end) {
    if (!get_varint(p, end, parent) || !get_varint(p, end, frame)) return false;
    if (parent > out.size() || frame > 0xffffffffull) return false;  // parents come first
    out.push_back({static_cast<int32_t>(parent) - 1, static_cast<uint32_t>(frame)});
  }
  return true;
}

void encode_values(const Values& v, std::string& out) {
  uint32_t prev = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    put_varint(out, i == 0 ? v[i].first : v[i].first - prev);
    put_varint(out, zig(v[i].second));
    prev = v[i].first;
  }
}

void merge_values(Values& into, const Values& add, int sign) {
  Values out;
  out.reserve(into.size() + add.size());
  std::size_t i = 0, j = 0;
  auto push = [&](uint32_t id, int64_t v) {
    if (v != 0) out.emplace_back(id, v);
  };
  while (i < into.size() || j < add.size()) {
    if (j == add.size() || (i < into.size() && into[i].first < add[j].first)) {
      push(into[i].first, into[i].second);
      ++i;
    } else if (i == into.size() || add[j].first < into[i].first) {
      if (sign < 0) throw ValueError("retention: subtracting a value the total lacks");
      push(add[j].first, add[j].second);
      ++j;
    } else {
      int64_t v = 0;
      if (sign > 0)
        v = checked_add(into[i].second, add[j].second, "a node's value");
      else if (__builtin_sub_overflow(into[i].second, add[j].second, &v) || v < 0)
        throw ValueError("retention: a total would turn negative");
      push(into[i].first, v);
      ++i;
      ++j;
    }
  }
  into.swap(out);
}

bool merge_blob(std::string_view blob, Values& into, int sign) {
  Values add;
  if (!each_pair(blob, [&](uint32_t id, int64_t v) { add.emplace_back(id, v); })) return false;
  merge_values(into, add, sign);
  return true;
}

bool add_blob(std::string_view blob, std::vector<int64_t>& dense) {
  bool ok = true;
  bool parsed = each_pair(blob, [&](uint32_t id, int64_t v) {
    if (id >= dense.size()) {
      ok = false;
      return;
    }
    dense[id] = checked_add(dense[id], v, "a node's value");
  });
  return parsed && ok;
}

namespace {

int64_t ceil_to(int64_t t, int64_t w) {
  int64_t b = bucket_of(t, w);
  return b == t ? t : b + w;
}

void cover_at(int64_t lo, int64_t hi, int level, const std::vector<Resolution>& res,
              const std::vector<int64_t>& horizon, std::vector<Piece>& out) {
  if (lo >= hi) return;
  if (level == 0) {
    out.push_back({0, lo, hi});
    return;
  }
  // A resolution the run has no buckets in (an upload keeps the finest only): finer ones serve.
  if (horizon[static_cast<std::size_t>(level)] == std::numeric_limits<int64_t>::max())
    return cover_at(lo, hi, level - 1, res, horizon, out);
  const int64_t w = res[static_cast<std::size_t>(level)].width_ns;
  const int64_t finer = horizon[static_cast<std::size_t>(level) - 1];
  int64_t a = ceil_to(lo, w), b = bucket_of(hi, w);
  if (lo < a && lo < finer) a = bucket_of(lo, w);  // the finer buckets of this edge are gone
  if (b < hi && b < finer) b = ceil_to(hi, w);
  if (a >= b) return cover_at(lo, hi, level - 1, res, horizon, out);
  out.push_back({level, a, b});
  cover_at(lo, a, level - 1, res, horizon, out);
  cover_at(b, hi, level - 1, res, horizon, out);
}

}  // namespace

std::vector<Piece> cover(int64_t from, int64_t until, const std::vector<Resolution>& res,
                         const std::vector<int64_t>& horizon) {
  std::vector<Piece> out;
  if (res.empty()) return out;
  // Keep bucket arithmetic away from the int64 ends (an open range means "everything").
  const int64_t span = res.back().width_ns * 4;
  from = std::max(from, std::numeric_limits<int64_t>::min() + span);
  until = std::min(until, std::numeric_limits<int64_t>::max() - span);
  cover_at(from, until, static_cast<int>(res.size()) - 1, res, horizon, out);
  return out;
}

std::vector<Piece> timeline_pieces(int64_t from, int64_t until, int64_t step,
                                   const std::vector<Resolution>& res,
                                   const std::vector<int64_t>& horizon) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<Piece> out;
  std::size_t level = 0;
  for (std::size_t l = 0; l < res.size(); ++l)
    if (res[l].width_ns <= step) level = l;
  while (level > 0 && horizon[level] == kNone) --level;  // an upload keeps its finest only
  for (std::size_t l = level; l < res.size() && from < until; ++l) {
    const int64_t lo = std::max(from, horizon[l] == kNone ? until : horizon[l]);
    if (lo < until) out.push_back({static_cast<int>(l), lo, until});
    if (horizon[l] != kNone) until = std::min(until, horizon[l]);
    until = bucket_of(until, res[std::min(l + 1, res.size() - 1)].width_ns);
  }
  return out;
}

std::vector<TrimStep> trim_steps(const std::vector<Resolution>& res, int64_t now_ns) {
  std::vector<TrimStep> out;
  for (std::size_t l = 0; l < res.size(); ++l)
    if (res[l].keep_ns > 0)  // the buckets that ended before now - keep
      out.push_back(
          {res[l].width_ns, now_ns - res[l].keep_ns - res[l].width_ns, l + 1 == res.size()});
  return out;
}

void check_batch(const Batch& b) {
  if (b.values.size() != b.nodes.size() * b.metrics.size())
    throw std::runtime_error("store: batch values do not match its nodes");
  for (const Batch::Node& n : b.nodes)
    if (n.frame >= b.frames.size()) throw std::runtime_error("store: batch node names no frame");
}

int64_t column_values(const Batch& b, std::size_t c, const std::vector<uint32_t>& node_of,
                      Values& vals) {
  const std::size_t cols = b.metrics.size();
  vals.clear();
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    const int64_t v = b.values[i * cols + c];
    if (v < 0) throw ValueError("a negative value");
    if (v != 0) vals.emplace_back(node_of[i], v);
  }
  std::sort(vals.begin(), vals.end());
  std::size_t k = 0;
  int64_t sum = 0;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    sum = checked_add(sum, vals[i].second, "the batch's total");
    if (k > 0 && vals[k - 1].first == vals[i].first)
      vals[k - 1].second = checked_add(vals[k - 1].second, vals[i].second, "a stack's value");
    else
      vals[k++] = vals[i];
  }
  vals.resize(k);
  return sum;
}

bool merged_bucket(std::string_view old, const Values& add, int sign, int64_t run,
                   std::string& out) {
  Values cur;
  if (!old.empty() && !merge_blob(old, cur))
    throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
  merge_values(cur, add, sign);
  out.clear();
  encode_values(cur, out);
  return !cur.empty();
}

std::size_t parts_to_merge(const std::vector<int64_t>& parts, int64_t fresh) {
  std::size_t k = 0;
  int64_t merged = fresh;
  while (k < parts.size()) {
    const int64_t next = parts[parts.size() - 1 - k];
    const bool too_many = parts.size() - k >= kMaxParts;
    if (!too_many && next > 2 * merged) break;  // a bigger older part waits: it is merged
    merged += next;                             // once the newer ones add up to half of it
    ++k;
  }
  return k;
}

int64_t merged_total(int64_t total, int64_t sum, int sign) {
  return sign > 0 ? checked_add(total, sum, "a bucket's total") : total - sum;
}

void add_removed(std::vector<Removed>& out, int64_t run, int metric, int64_t total,
                 std::string_view blob) {
  if (out.empty() || out.back().run != run || out.back().metric != metric)
    out.push_back({run, metric, 0, {}});
  out.back().sum = checked_add(out.back().sum, total, "a bucket's total");
  if (!merge_blob(blob, out.back().v))
    throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
}

}  // namespace lfs

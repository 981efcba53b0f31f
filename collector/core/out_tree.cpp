// Output snapshot, size cut and bounded files (see out_tree.hpp).
#include "core/out_tree.hpp"

#include <sys/stat.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace lfc {

namespace {

constexpr std::string_view kUnnamedFrame = "[luaflame] unnamed";

void link_children(OutTree& o) {
  const std::size_t n = o.size();
  o.first.assign(n, OutTree::kNone);
  o.next.assign(n, OutTree::kNone);
  std::vector<uint32_t> last(n, OutTree::kNone);
  for (uint32_t i = 1; i < n; ++i) {
    uint32_t p = o.parent[i];
    if (o.first[p] == OutTree::kNone)
      o.first[p] = i;
    else
      o.next[last[p]] = i;
    last[p] = i;
  }
}

// Every node kept: the collector's numbering is the snapshot's.
template <class FrameOf>
void copy_all(const Tree& t, uint32_t n, const std::function<uint64_t(uint32_t, int)>& value,
              const FrameOf& frame_of, uint32_t root_frame, OutTree& o) {
  o.parent.resize(n);
  o.frame.resize(n);
  o.val.assign(static_cast<std::size_t>(n) * o.nm, 0);
  o.parent[0] = 0;
  o.frame[0] = root_frame;
  uint64_t* v = o.val.data();
  for (uint32_t i = 1; i < n; ++i) {
    o.parent[i] = t.parent(i);
    o.frame[i] = frame_of(i);
    for (int m = 0; m < o.nm; ++m) v[static_cast<std::size_t>(i) * o.nm + m] = value(i, m);
  }
}

}  // namespace

std::vector<char> OutTree::live(int m) const {
  std::vector<char> l(size(), 0);
  for (std::size_t i = size(); i-- > 1;)
    if (l[i] || value(static_cast<uint32_t>(i), m)) l[i] = l[parent[i]] = 1;
  return l;
}

std::vector<uint64_t> OutTree::totals(int m) const {
  std::vector<uint64_t> tot(size(), 0);
  for (std::size_t i = size(); i-- > 0;) {
    tot[i] += value(static_cast<uint32_t>(i), m);
    if (i) tot[parent[i]] += tot[i];
  }
  return tot;
}

namespace {

// Which nodes fit the budget: none marked (an empty vector) when all of
// them do, the common case; else the cheapest paths first, a parent always
// before its children, each with room for a truncated child it may get.
template <class FrameOf>
std::vector<char> fit_budget(const Tree& t, const OutTree& o, const FrameOf& frame_of,
                             const NodeCost& cost, uint64_t budget) {
  const uint32_t n = t.size();
  if (!budget || n <= 1) return {};
  // Each node's path length and cost, computed once: up to the budget
  // first, then (over it) the rest, for the cut.
  std::vector<uint64_t> plen(n, 0), c(n, 0);
  auto measure = [&](uint32_t i) {
    const uint32_t p = t.parent(i);
    const std::string_view name = o.names[frame_of(i)];
    plen[i] = plen[p] + (p ? 1 : 0) + name.size();
    return c[i] = cost(plen[i], name);
  };
  uint64_t total = 0;
  uint32_t measured = 1;  // nodes [1, measured) have plen and c
  for (; measured < n && total <= budget; ++measured) total += measure(measured);
  if (total <= budget) return {};
  for (; measured < n; ++measured) measure(measured);
  std::vector<uint32_t> order(n - 1);
  for (uint32_t i = 1; i < n; ++i) order[i - 1] = i;
  // Stable: equal lengths keep creation order, so a parent (strictly
  // shorter) always comes before its children.
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return plen[a] < plen[b]; });
  std::vector<char> keep(n, 0);
  keep[0] = 1;
  uint64_t used = 0;
  for (uint32_t i : order) {
    uint64_t need = c[i] + cost(plen[i] + 1 + kTruncatedFrame.size(), kTruncatedFrame);
    if (used + need > budget) break;
    used += need;
    keep[i] = 1;
  }
  return keep;
}

// The kept nodes, renumbered; a dropped node's values go to a truncated
// child of its nearest kept ancestor (one per ancestor).
template <class FrameOf>
void copy_kept(const Tree& t, const std::vector<char>& keep,
               const std::function<uint64_t(uint32_t, int)>& value, const FrameOf& frame_of,
               uint32_t root_frame, uint32_t trunc_frame, OutTree& o) {
  const uint32_t n = t.size();
  std::vector<uint32_t> idx(n, OutTree::kNone), trunc_of;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (keep[i]) idx[i] = kept++;
  o.parent.resize(kept);
  o.frame.resize(kept);
  o.val.assign(static_cast<std::size_t>(kept) * o.nm, 0);
  o.frame[0] = root_frame;
  o.parent[0] = 0;
  // Dropped nodes: the nearest kept ancestor (computed in creation order).
  std::vector<uint32_t> anc;
  if (kept < n) {
    anc.assign(n, 0);
    trunc_of.assign(kept, OutTree::kNone);
  }
  for (uint32_t i = 1; i < n; ++i) {
    uint32_t p = t.parent(i);
    if (keep[i]) {
      uint32_t k = idx[i];
      o.parent[k] = idx[p];
      o.frame[k] = frame_of(i);
      for (int m = 0; m < o.nm; ++m) o.val[static_cast<std::size_t>(k) * o.nm + m] = value(i, m);
      continue;
    }
    uint32_t a = keep[p] ? idx[p] : anc[p];
    anc[i] = a;
    if (trunc_of[a] == OutTree::kNone) {
      trunc_of[a] = static_cast<uint32_t>(o.parent.size());
      o.parent.push_back(a);
      o.frame.push_back(trunc_frame);
      o.val.resize(o.val.size() + o.nm, 0);
    }
    for (int m = 0; m < o.nm; ++m)
      o.val[static_cast<std::size_t>(trunc_of[a]) * o.nm + m] += value(i, m);
    ++o.dropped;
  }
}

}  // namespace

OutTree snapshot(const Tree& t, const FrameNames& f,
                 const std::function<uint64_t(uint32_t, int)>& value, const NodeCost& cost,
                 uint64_t budget) {
  // Nodes first: a published node's frame is published before it.
  const uint32_t n = t.size();
  const uint32_t nf = f.size();
  OutTree o;
  o.nm = t.nmetrics();
  o.names.reserve(nf + 2);
  for (uint32_t i = 0; i < nf; ++i) o.names.push_back(f[i]);
  o.names.push_back(kUnnamedFrame);
  const uint32_t trunc_frame = static_cast<uint32_t>(o.names.size());
  o.names.push_back(kTruncatedFrame);
  auto frame_of = [&](uint32_t i) {
    uint32_t fr = t.frame(i);
    return fr < nf ? fr : nf;
  };
  std::vector<char> keep = fit_budget(t, o, frame_of, cost, budget);
  if (keep.empty())
    copy_all(t, n, value, frame_of, nf, o);
  else
    copy_kept(t, keep, value, frame_of, nf, trunc_frame, o);
  link_children(o);
  return o;
}

// ---- bounded files ----

// A path that exists and is not a regular file (/dev/null, a FIFO, a
// terminal) is written in place: renaming a temporary file over it replaced
// /dev/null with a regular file (seen running `-o /dev/null` as root).
static bool special_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

OutFile::OutFile(std::string path, uint64_t limit)
    : path_(std::move(path)),
      in_place_(special_file(path_)),
      tmp_(in_place_ ? path_ : path_ + ".tmp"),
      limit_(limit) {
  buf_.reserve(kBuf + 4096);
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) err_ = "cannot write " + tmp_ + ": " + std::strerror(errno);
}

OutFile::~OutFile() {
  if (f_) {
    std::fclose(f_);
    if (!in_place_) std::remove(tmp_.c_str());
  }
}

void OutFile::spill() {
  if (!err_.empty() || buf_.empty()) {
    buf_.clear();
    return;
  }
  if (limit_ && written_ + buf_.size() > limit_) {
    err_ = "not written: it would exceed the output limit of " + std::to_string(limit_) +
           " bytes (max_output)";
  } else if (std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
    err_ = "cannot write " + path_ + ": " + std::strerror(errno);
  }
  written_ += buf_.size();
  buf_.clear();
}

bool OutFile::commit() {
  spill();
  if (!f_) return false;
  bool flushed = std::fflush(f_) == 0;
  int e = errno;
  bool closed = std::fclose(f_) == 0;
  if (!closed) e = errno;
  f_ = nullptr;
  if (err_.empty() && !(flushed && closed))
    err_ = "cannot write " + path_ + ": " + std::strerror(e);
  // Renamed into place only when whole: a reader never sees half a file.
  if (in_place_) return err_.empty();
  if (err_.empty() && std::rename(tmp_.c_str(), path_.c_str()) != 0)
    err_ = "cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno);
  if (!err_.empty()) std::remove(tmp_.c_str());
  return err_.empty();
}

uint64_t output_limit(const std::string& path, uint64_t max_output) {
  std::string dir = path;
  std::size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return max_output;
  uint64_t half_free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize / 2;
  return max_output && max_output < half_free ? max_output : half_free;
}

// ---- folded text ----

namespace {

// Depth first with one path buffer; `emit(path, value)` per non-zero line.
template <class Emit>
void walk_folded(const OutTree& t, int m, Emit&& emit) {
  if (t.size() <= 1) return;
  std::vector<char> live = t.live(m);
  auto next_live = [&](uint32_t c) {
    while (c != OutTree::kNone && !live[c]) c = t.next[c];
    return c;
  };
  std::string path;
  std::vector<std::pair<uint32_t, std::size_t>> st;  // node, path length before it
  uint32_t c = next_live(t.first[0]);
  if (c != OutTree::kNone) st.push_back({c, 0});
  while (!st.empty()) {
    auto [node, len] = st.back();
    path.resize(len);
    if (len) path += ';';
    path += t.name(node);
    if (uint64_t v = t.value(node, m)) emit(path, v);
    if (uint32_t k = next_live(t.first[node]); k != OutTree::kNone) {
      st.push_back({k, path.size()});
      continue;
    }
    while (!st.empty()) {  // on to the next sibling, climbing as needed
      uint32_t s = next_live(t.next[st.back().first]);
      if (s != OutTree::kNone) {
        st.back().first = s;
        break;
      }
      st.pop_back();
    }
  }
}

void append_line(std::string& out, std::string_view path, uint64_t v) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof num, v);
  out.append(path);
  out += ' ';
  out.append(num, r.ptr);
  out += '\n';
}

}  // namespace

void write_folded_text(const OutTree& t, int m, const std::function<void(std::string_view)>& out) {
  std::string line;
  walk_folded(t, m, [&](const std::string& path, uint64_t v) {
    line.clear();
    append_line(line, path, v);
    out(line);
  });
}

void write_folded_file(const OutTree& t, int m, OutFile& out) {
  walk_folded(t, m, [&](const std::string& path, uint64_t v) {
    append_line(out.buffer(), path, v);
    out.maybe_spill();
  });
}

}  // namespace lfc

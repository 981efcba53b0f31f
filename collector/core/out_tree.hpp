// What the output files are written from: a snapshot of the call tree
// (values read once, children linked in creation order), cut to a byte
// budget when the file would be too big, and the bounded file it goes to.
//
// Every writer (folded, SVG, speedscope, the streamer's fallback) walks this
// tree with one path buffer; none holds a string per path. The cut keeps the
// cheapest nodes first (shortest folded paths: every ancestor of a kept node
// is kept) and folds each dropped subtree's values into a
// "[luaflame] truncated" child of its nearest kept ancestor, so totals and
// the widths of the kept frames stay true.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tree.hpp"

namespace lfc {

/// The frame that stands for what a size limit cut off.
inline constexpr std::string_view kTruncatedFrame = "[luaflame] truncated";

struct OutTree {
  static constexpr uint32_t kNone = 0xffffffffu;
  int nm = 1;                           ///< metric columns
  std::vector<std::string_view> names;  ///< frame names (the collector's, then kTruncatedFrame)
  std::vector<uint32_t> parent, frame;  ///< node 0 is the root; a parent precedes its children
  std::vector<uint32_t> first, next;    ///< children in creation order (kNone ends a list)
  std::vector<uint64_t> val;            ///< node * nm + metric: self values
  uint64_t dropped = 0;                 ///< collector nodes folded into truncated frames

  std::size_t size() const { return parent.size(); }
  uint64_t value(uint32_t n, int m) const { return val[static_cast<std::size_t>(n) * nm + m]; }
  std::string_view name(uint32_t n) const { return names[frame[n]]; }
  /// Per node: whether its subtree holds a non-zero value of metric m.
  std::vector<char> live(int m) const;
  /// Per node: the subtree total of metric m.
  std::vector<uint64_t> totals(int m) const;
};

/// Bytes a node may cost in the file being written (its folded line, its
/// SVG element...), given its folded path length from the root.
using NodeCost = std::function<uint64_t(std::size_t path_len, std::string_view name)>;

/// Snapshots `t`, with values `value(node, metric)`, cut so that the sum of
/// `cost` over the kept nodes stays within `budget` bytes (0 = no cut).
OutTree snapshot(const Tree& t, const FrameNames& f,
                 const std::function<uint64_t(uint32_t, int)>& value, const NodeCost& cost,
                 uint64_t budget);

/// A file written through a temporary and renamed into place when whole, so
/// a reader never sees half a file. Refuses to grow past `limit` bytes (the
/// file is then removed): never a full disk.
class OutFile {
 public:
  OutFile(std::string path, uint64_t limit);
  ~OutFile();
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  bool ok() const { return err_.empty(); }
  void write(std::string_view s) {
    if (buf_.size() + s.size() > kBuf) spill();
    buf_.append(s);
  }
  /// Room in the buffer for appending directly (folded lines).
  std::string& buffer() { return buf_; }
  void maybe_spill() {
    if (buf_.size() >= kBuf) spill();
  }
  /// The file is not to be written (its writer failed): commit() removes it.
  void fail(std::string why) {
    if (err_.empty()) err_ = std::move(why);
  }
  /// Flushes, closes and renames. False (and error()) on any failure.
  bool commit();
  const std::string& error() const { return err_; }
  uint64_t bytes() const { return written_ + buf_.size(); }

 private:
  static constexpr std::size_t kBuf = 1 << 20;
  void spill();
  std::string path_;
  bool in_place_;  ///< not a regular file (/dev/null): written as it is, no rename
  std::string tmp_;
  uint64_t limit_;
  FILE* f_ = nullptr;
  std::string buf_;
  uint64_t written_ = 0;
  std::string err_;
};

/// The output size limit for files in `dir`: `max_output`, or half the free
/// space of the file system when that is less.
uint64_t output_limit(const std::string& path, uint64_t max_output);

/// Folded text of metric m from the tree, handed to `out` (OutFile or string).
void write_folded_text(const OutTree& t, int m, const std::function<void(std::string_view)>& out);
void write_folded_file(const OutTree& t, int m, OutFile& out);

}  // namespace lfc

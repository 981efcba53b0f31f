// clang-format off
// luaflame wire format, version 1: how the collector streams profile chunks
// to the server. This header is the only thing the collector and the server
// share. Folded text stays the export format; this is the compact stream.
//
// A chunk is the delta of a run's call tree since the previous chunk. Frames
// are dictionary-coded and stacks share prefixes (each node names its parent),
// so a chunk grows with the number of distinct call paths touched, not with
// the run's length. Every chunk is self-contained: a retried or reordered
// chunk decodes on its own.
//
//   chunk   = magic header* frame* node* end
//   magic   = "luaflame-wire" SP version LF      ; version = "1"
//   header  = "seq" SP uint LF                   ; 0, 1, 2 ... per run; a retry repeats its seq
//           | "from" SP uint LF                  ; window start, Unix time in ns
//           | "until" SP uint LF                 ; window end, Unix time in ns
//           | "metrics" 1*(SP metric) LF         ; the value columns of every node, in order;
//                                                ; once per chunk, each metric once
//   frame   = "f" SP text LF                     ; frames are numbered 0, 1, 2 ... in order
//   node    = "n" SP parent SP frameidx *(SP value) LF
//                                                ; nodes are numbered 0, 1, 2 ... in order;
//                                                ; one value per metric: the node's own
//                                                ; (self) value delta
//   parent  = "-" | uint                         ; "-": a root; else an earlier node's number
//   frameidx = uint                              ; a frame of this chunk
//   end     = "end" SP uint LF                   ; the number of nodes: a check against truncation
//   metric  = "samples" | "time" | "calls" | "alloc_bytes" | "alloc_count"
//           | "live_bytes" | "live_count"
//   text    = 1*(any byte but LF, CR and ";")    ; a frame name, as it appears in folded text
//   uint    = 1*DIGIT                            ; at most 2^63-1 (9223372036854775807)
//   value   = uint                               ; counts, nanoseconds or bytes: integers
//
// "seq", "metrics" and "end" are required; "from" and "until" may be omitted
// (the server then uses its arrival time). Readers reject any other version
// by name ("luaflame-wire 2 is not supported; this server reads version 1").
//
// The HTTP exchange around chunks (the server's side documents it in docs/api.md):
//   POST /api/streams           JSON {"stream": uuid, "name", "tags": {..}, "metrics": [..],
//                               "started": unix_ns, "hz"} -> 201 {"id", "url"}; the same
//                               uuid again answers 200 with the same id (a retried create).
//   POST /api/runs/{id}/chunks  a chunk (Content-Encoding: gzip allowed) -> 200
//                               {"seq", "duplicate"}; a seq seen before counts once.
//   POST /api/runs/{id}/finish  optional JSON {"stats": {..}} -> 200; later chunks -> 409.
// clang-format on
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace lfw {

inline constexpr int kVersion = 1;
inline constexpr std::string_view kMagic = "luaflame-wire";

/// A metric: its name (the same in files, the wire, the server and the pages), the
/// units of its values (all integers), and the pprof sample type it is written as
/// (Go's names: cpu, alloc_space, inuse_objects...; read back by the server's pprof ingest).
struct Metric {
  std::string_view name;
  std::string_view units;
  std::string_view pprof_type;
  std::string_view pprof_unit;
};
/// Every metric, in wire order: the one source of truth for names and units.
inline constexpr Metric kMetricList[] = {
    {"samples", "samples", "samples", "count"},
    {"time", "ns", "cpu", "nanoseconds"},
    {"calls", "calls", "calls", "count"},
    {"alloc_bytes", "bytes", "alloc_space", "bytes"},
    {"alloc_count", "count", "alloc_objects", "count"},
    {"live_bytes", "bytes", "inuse_space", "bytes"},
    {"live_count", "count", "inuse_objects", "count"}};  // live_count: pprof inuse_objects
inline constexpr std::size_t kMetricCount = std::size(kMetricList);
/// The metric names alone, in the same order (derived from kMetricList).
inline constexpr std::array<std::string_view, kMetricCount> kMetrics = [] {
  std::array<std::string_view, kMetricCount> names{};
  for (std::size_t i = 0; i < kMetricCount; ++i) names[i] = kMetricList[i].name;
  return names;
}();
bool is_metric(std::string_view name);

/// One node of a chunk's delta tree.
struct Node {
  int64_t parent = -1;           ///< earlier node index, or -1 for the root
  uint32_t frame = 0;            ///< index into Chunk::frames
  std::vector<uint64_t> values;  ///< one per metric (self values)
};

/// A decoded (or to-be-encoded) chunk.
struct Chunk {
  uint64_t seq = 0;
  uint64_t from_ns = 0;   ///< 0 = not given
  uint64_t until_ns = 0;  ///< 0 = not given
  std::vector<std::string> metrics;
  std::vector<std::string> frames;
  std::vector<Node> nodes;
};

/// Appends the encoding of `chunk` to `out`.
void encode(const Chunk& chunk, std::string& out);

/// Decodes `text`. On failure returns false and sets `error` to a message
/// naming the line ("line 7: node parent 9 is not an earlier node").
bool decode(std::string_view text, Chunk& chunk, std::string& error);

/// Calls `fn(stack, values)` for every node with a non-zero value, where
/// `stack` is the ;-joined folded stack from the root. For tests and tools: it builds a
/// string per stack (the server keeps the tree: server/store/batch.hpp).
template <class Fn>
void for_each_stack(const Chunk& chunk, Fn&& fn) {
  std::vector<std::string> paths(chunk.nodes.size());
  for (std::size_t i = 0; i < chunk.nodes.size(); ++i) {
    const Node& n = chunk.nodes[i];
    const std::string& name = chunk.frames[n.frame];
    paths[i] = n.parent < 0 ? name : paths[static_cast<std::size_t>(n.parent)] + ";" + name;
    bool any = false;
    for (uint64_t v : n.values) any = any || v != 0;
    if (any) fn(paths[i], n.values);
  }
}

// ---- A run's name and tags (POST /api/streams, uploads, --tag): one rule for the collector,
// the server and the CLI; the pages show the server's answer. ----

inline constexpr std::size_t kMaxNameBytes = 200;
inline constexpr std::size_t kMaxTagKeyBytes = 64;
inline constexpr std::size_t kMaxTagValueBytes = 256;
/// Why `name` is not a run name, "" when it is: 1 to 200 bytes, no control characters.
std::string name_error(std::string_view name);
/// Why key=value is not a tag, "" when it is: a key of 1 to 64 bytes of ASCII letters, digits
/// and _ - . /; a value of at most 256 bytes without control characters.
std::string tag_error(std::string_view key, std::string_view value);
/// `text` made to pass the rule of a name (max = kMaxNameBytes) or a tag value (max =
/// kMaxTagValueBytes), for text a program did not choose (file names, the environment):
/// control characters written as \xNN, cut to `max` bytes where no UTF-8 character is split.
std::string fit_text(std::string_view text, std::size_t max);
/// A tag key made to pass the rule: other bytes as '_', cut to 64 bytes; "_" for "".
std::string fit_tag_key(std::string_view key);

}  // namespace lfw

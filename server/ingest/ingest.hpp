// Turning request bodies into store batches: strict folded parsing, wire
// chunks, and Pyroscope's /ingest parameters. No store or network access
// (only http/error.hpp's HttpError from the HTTP side); errors are HttpErrors with the
// status the API promises.
#pragma once

#include <string>
#include <string_view>

#include "luaflame/folded.hpp"
#include "luaflame/wire.hpp"
#include "store/store.hpp"

namespace lfs {

/// Parses folded text strictly into `batch` as a tree (one column; repeated stacks merged,
/// sums checked). Any bad line is a 400 {"error", "line", "reason"}; a differential
/// (two-column) body too; so is a fractional count: the store keeps 64-bit integers, and
/// rounding would silently change totals (flamegraph.pl accepts 0.5; scale such values).
/// Returns the number of lines accepted.
std::size_t parse_folded_batch(std::string_view text, const lf::ParseOptions& opts, Batch& batch);

/// Pyroscope "lines" format: one stack per line, each line one sample.
/// Rewritten to folded text (count 1 per line, blank lines kept so line numbers match).
std::string lines_to_folded(std::string_view text);

/// Decodes a wire chunk into `batch` as the tree it is (columns = the chunk's metrics),
/// checking frames and depth like strict parsing. 400 on any problem. The returned chunk
/// keeps its headers only (frames and nodes moved into the batch).
lfw::Chunk decode_chunk(std::string_view body, const lf::ParseOptions& opts, Batch& batch);

/// Metric of an upload from ?units= and ?metric= (422 when unknown).
int upload_metric(const std::string& units, const std::string& metric);

/// Pyroscope's name "APP.KIND{k=v,...}".
struct PyroscopeName {
  std::string app;   ///< "my.app" (the part before the last '.', or everything)
  std::string kind;  ///< "cpu", "alloc_space", ... ("" when none)
  Tags labels;
};
/// Parses a Pyroscope name (400 when malformed).
PyroscopeName parse_pyroscope_name(const std::string& name);

/// Metric for Pyroscope's units/aggregationType, falling back on KIND (422 when unknown).
int pyroscope_metric(const std::string& units, const std::string& aggregation,
                     const std::string& kind);

}  // namespace lfs

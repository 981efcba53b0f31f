// pprof request bodies -> store batches: each sample type becomes a metric.
// Pure functions; errors are HttpErrors with the status the API promises.
#pragma once

#include <string>
#include <string_view>

#include "luaflame/folded.hpp"
#include "luaflame/pprof.hpp"
#include "store/store.hpp"

namespace lfs {

/// Metric of a pprof sample type without a sample_type_config, or -1:
/// samples|sample/count -> samples, cpu|wall/nanoseconds -> time, calls/count -> calls,
/// alloc_space/bytes -> alloc_bytes, alloc_objects/count -> alloc_count,
/// inuse_space|space/bytes -> live_bytes, inuse_objects|objects/count -> live_count.
int pprof_type_metric(const std::string& type, const std::string& unit);

/// The sample type write_pprof gives a metric (the inverse of pprof_type_metric).
lf::PprofValueType metric_pprof_type(int metric);

/// What a pprof upload holds.
struct PprofBatch {
  Batch batch;              ///< one column per metric taken
  std::size_t samples = 0;  ///< samples read
  int64_t time_nanos = 0;   ///< the profile's own time (0: none)
  int64_t duration_nanos = 0;
  int64_t period = 0;  ///< e.g. 10000000 ns for 100 Hz CPU profiles
  std::string period_unit;
};

/// Reads a profile (gzipped or plain) into batch columns. `prev` (may be
/// empty) is the agent's previous profile: cumulative types are sent as the
/// difference. `config` (may be empty) is Pyroscope's sample_type_config JSON
/// ({"TYPE": {"units", "aggregation", "cumulative", ...}}): then only the
/// types it names are taken, the metric chosen by its units and aggregation.
/// Frames are checked like strict folded input (`opts`). 400 for a bad
/// profile, 422 for a sample type with no metric (named in the error).
PprofBatch pprof_to_batch(std::string_view profile, std::string_view prev, std::string_view config,
                          const lf::ParseOptions& opts);

}  // namespace lfs

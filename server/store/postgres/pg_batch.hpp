// Adding a batch to a run in the PostgreSQL store (pg_batch.cpp), for PgStore
// (pg_store.cpp): each step one or two statements on the caller's transaction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/batch.hpp"
#include "store/postgres/pg_client.hpp"

namespace lfs {

/// The width under which a run's merged tree is kept.
inline constexpr int64_t kPgWhole = 0;
/// Rough bytes a row takes beside its blob (tuple header, item pointer, index entry), for
/// the disk budget: PostgreSQL reuses deleted space after VACUUM, so the database's size
/// cannot tell what a deletion freed; runs.bytes can.
inline constexpr int64_t kPgRowBytes = 64;

inline std::vector<std::string_view> pg_views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

/// The buckets one metric's values go to: (width, start) per resolution, and the merged
/// tree (kPgWhole, 0).
struct PgTargets {
  std::vector<int64_t> widths, starts;
};

/// Writes the dictionary rows a batch added to the run (frames from f0, nodes from n0) in
/// one INSERT; returns the bytes they take.
int64_t pg_write_dict(pg::Conn& c, int64_t run, const RunTree& tree, std::size_t f0,
                      std::size_t n0);
/// Adds `sum` to a metric's run total (ValueError past 2^63-1, before anything is written).
void pg_add_total(pg::Conn& c, int64_t run, int metric, int64_t sum);
/// Adds a metric's values (summing to `sum`) to its target buckets: each merges its newest
/// parts that are not much bigger than the new values (parts_to_merge), taken out in one
/// DELETE ... RETURNING and written back with them as one part. Returns the change in
/// stored bytes.
int64_t pg_merge_metric(pg::Conn& c, int64_t run, int metric, const PgTargets& t,
                        const Values& vals, int64_t sum);

}  // namespace lfs

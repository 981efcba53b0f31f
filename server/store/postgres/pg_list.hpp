// Reading runs from the PostgreSQL store (pg_list.cpp), for PgStore (pg_store.cpp): rows, the
// listing, and which buckets a run still holds.
#pragma once

#include <vector>

#include "store/postgres/pg_client.hpp"
#include "store/store.hpp"

namespace lfs {

/// Columns of a run row, in the order pg_read_run reads them ("SELECT ... FROM runs").
inline constexpr const char* kPgRunColumns =
    "SELECT id, name, source, status, started_ns, ended_ns, hz, stats, stack_count, revision FROM "
    "runs";
/// Row `i` of a result of kPgRunColumns (tags and totals not filled).
RunInfo pg_read_run(const pg::Result& r, int i);
/// Tags and totals of `runs`: two queries for a whole page.
void pg_fill_runs(pg::Conn& c, std::vector<RunInfo>& runs);
/// First bucket start each of `res` still holds for (run, metric); INT64_MAX when none.
std::vector<int64_t> pg_horizons(pg::Conn& c, int64_t run, int metric,
                                 const std::vector<Resolution>& res);
/// A page of runs (RunFilter, RunList in store.hpp), in one read-only snapshot on `c`.
RunList pg_list_runs(pg::Conn& c, const RunFilter& f);

}  // namespace lfs

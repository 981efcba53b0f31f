// Reading runs from the PostgreSQL store (pg_list.cpp), for PgStore (pg_store.cpp).
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
/// A page of runs (RunFilter, RunList in store.hpp), in one read-only snapshot on `c`.
RunList pg_list_runs(pg::Conn& c, const RunFilter& f);

}  // namespace lfs

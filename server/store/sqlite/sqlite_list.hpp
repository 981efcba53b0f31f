// Reading runs from the SQLite store (sqlite_list.cpp), for SqliteStore
// (sqlite_store.cpp): a run row, its tags and totals, and a page of runs.
#pragma once

#include <sqlite3.h>

#include "store/sqlite/sqlite_util.hpp"
#include "store/store.hpp"

namespace lfs {

/// The columns sqlite_read_run reads, in its order ("SELECT ..."; add "FROM runs ...").
inline constexpr const char* kSqliteRunColumns =
    "SELECT runs.id, runs.name, source, status, started_ns, ended_ns, hz, stats, stack_count, "
    "revision";
/// The run of a row of kSqliteRunColumns (tags and totals not filled).
RunInfo sqlite_read_run(const sql::Stmt& q);
/// Fills a run's tags and metric totals.
void sqlite_fill_run(sqlite3* db, RunInfo& r);
/// A page of runs (RunFilter, RunList in store.hpp), read on `db`.
RunList sqlite_list_runs(sqlite3* db, const RunFilter& f);

}  // namespace lfs

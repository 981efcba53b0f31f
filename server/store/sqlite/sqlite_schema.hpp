// The SQLite store's schema and migrations (see sqlite_schema.cpp).
#pragma once

#include <sqlite3.h>

#include <functional>
#include <string>

#include "store/store.hpp"

namespace lfs {

/// Creates or migrates the schema of `db` to the latest version. A v2 store's values are
/// converted by calling add(run, batch) inside the migration's transaction. Returns true
/// when an older store was converted (the caller then VACUUMs once for incremental vacuum).
bool migrate_schema(sqlite3* db, const std::string& path,
                    const std::function<void(int64_t, const Batch&)>& add);

}  // namespace lfs

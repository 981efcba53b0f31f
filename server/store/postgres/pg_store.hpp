// PgStore: the Store on PostgreSQL, for several luaflame-server processes on
// one database (docs/server.md, "PostgreSQL and several servers").
#pragma once

#include <memory>
#include <string>

#include "store/store.hpp"

namespace lfs {

/// Connects to `url` (a libpq URI, postgresql://user:password@host:port/db?...), creates or
/// migrates the schema (serialised between servers by an advisory lock), and returns the store.
/// Throws std::runtime_error with a message (password redacted) on failure.
std::unique_ptr<Store> open_pg_store(const std::string& url, const StoreOptions& opts);

}  // namespace lfs

// The PostgreSQL store's schema (pg_schema.cpp), for PgStore (pg_store.cpp).
#pragma once

#include "store/postgres/pg_client.hpp"

namespace lfs {

/// Creates the schema on an empty database or migrates it to the latest version, in one
/// transaction under an advisory lock (two servers starting at once: one creates, the other
/// waits and sees it). Throws on a database newer than this server.
void pg_migrate(pg::Conn& c);

}  // namespace lfs

// The store the contract suite (test_store.cpp) runs against: SQLite in a
// fresh folder, or, in the program built with LUAFLAME_TEST_PG, a fresh
// database on the PostgreSQL the tests start (pg_harness.hpp). One suite,
// both backends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "store/store.hpp"
#ifdef LUAFLAME_TEST_PG
#include "pg_harness.hpp"
constexpr bool kPg = true;
#else
constexpr bool kPg = false;
#endif

struct TempDir {
  std::string path;  ///< a fresh folder
  std::string spec;  ///< the store: "sqlite:" + path, or a fresh PostgreSQL database
  TempDir() {
    char tmpl[] = "/tmp/luaflame-store-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
#ifdef LUAFLAME_TEST_PG
    spec = lft::Postgres::shared().new_database();
#else
    spec = "sqlite:" + path;
#endif
  }
  ~TempDir() {
    std::filesystem::remove_all(path);
  }
};

/// Opens (again, for reopening tests) the store of `dir`.
inline std::unique_ptr<lfs::Store> open_test_store(const TempDir& dir,
                                                   const lfs::StoreOptions& opts) {
  return lfs::open_store(dir.spec, opts);
}

/// The source store (SourceStore) of `dir`'s backend: PostgreSQL's table in the same database,
/// or SQLite's sources.db in the folder. A new one per call (a reopening, or a second server).
inline std::unique_ptr<lfs::SourceStore> open_test_sources(const TempDir& dir) {
  if (kPg) return lfs::open_store_sources(dir.spec);
  return lfs::open_sqlite_sources(dir.path);
}

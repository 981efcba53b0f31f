// Thin RAII over SQLite's C API for the store: statements whose every call is
// checked, transactions that roll back unless committed.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

namespace lfs::sql {

[[noreturn]] inline void fail(sqlite3* db, const std::string& what) {
  throw std::runtime_error("store: " + what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

/// Prepared statements of one connection kept by their SQL (the writer's hot statements are
/// prepared once, not per request). Not thread-safe: the writer uses it under its mutex.
class StmtCache {
 public:
  explicit StmtCache(sqlite3* db = nullptr) : db_(db) {}
  ~StmtCache() { clear(); }
  StmtCache(const StmtCache&) = delete;
  StmtCache& operator=(const StmtCache&) = delete;
  void reset(sqlite3* db) {
    clear();
    db_ = db;
  }
  sqlite3* db() const { return db_; }
  sqlite3_stmt* get(const std::string& sql) {
    auto it = stmts_.find(sql);
    if (it != stmts_.end()) return it->second;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) !=
        SQLITE_OK)
      fail(db_, sql);
    stmts_.emplace(sql, st);
    return st;
  }
  void clear() {
    for (auto& [sql, st] : stmts_) sqlite3_finalize(st);
    stmts_.clear();
  }

 private:
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> stmts_;
};

/// A prepared statement with positional binds. A bind or step that SQLite refuses throws.
/// step() to the end (or run()) leaves it reset; a statement stopped early is reset by
/// reset() or its destructor, so no read stays open across a COMMIT (an open read keeps
/// the WAL from being checkpointed).
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) fail(db, sql);
  }
  Stmt(sqlite3* db, const std::string& sql) : Stmt(db, sql.c_str()) {}
  /// A statement from `cache`: reset (not finalized) when this object ends.
  Stmt(StmtCache& cache, const std::string& sql)
      : db_(cache.db()), st_(cache.get(sql)), owned_(false) {}
  ~Stmt() {
    if (owned_) {
      sqlite3_finalize(st_);
    } else {
      sqlite3_reset(st_);
      sqlite3_clear_bindings(st_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(st_, i, v), i); }
  Stmt& bind(int i, int v) { return check(sqlite3_bind_int64(st_, i, v), i); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(st_, i, v), i); }
  Stmt& bind(int i, std::string_view v) {
    return check(sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), i);
  }
  /// Binds `v` without a copy (SQLITE_STATIC): its bytes must stay alive until
  /// the statement has run; every caller binds and runs in one expression.
  Stmt& blob(int i, std::string_view v) {
    // A zero-length blob is bound as "" (not NULL): data columns are NOT NULL.
    return check(sqlite3_bind_blob64(st_, i, v.empty() ? "" : v.data(), v.size(), SQLITE_STATIC),
                 i);
  }
  Stmt& null(int i) { return check(sqlite3_bind_null(st_, i), i); }
  /// True while there is a row; at the end the statement is reset for reuse.
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    sqlite3_reset(st_);
    if (rc == SQLITE_DONE) return false;
    fail(db_, "step");
  }
  void run() {
    while (step()) {
    }
    sqlite3_clear_bindings(st_);
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
  double dbl(int c) const { return sqlite3_column_double(st_, c); }
  std::string_view text(int c) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c)))
             : std::string_view();
  }
  std::string_view blob(int c) const {
    auto p = static_cast<const char*>(sqlite3_column_blob(st_, c));
    return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c)))
             : std::string_view();
  }
  bool is_null(int c) const { return sqlite3_column_type(st_, c) == SQLITE_NULL; }
  bool is_int(int c) const { return sqlite3_column_type(st_, c) == SQLITE_INTEGER; }

 private:
  Stmt& check(int rc, int i) {
    if (rc != SQLITE_OK) fail(db_, "bind " + std::to_string(i) + " of " + sqlite3_sql(st_));
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  bool owned_ = true;
};

inline void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error(std::string("store: ") + msg);
  }
}

inline int64_t pragma(sqlite3* db, const char* sql) {
  Stmt q(db, sql);
  int64_t v = q.step() ? q.i64(0) : 0;
  q.reset();
  return v;
}

/// Opens (creating) the database at `path`, with a busy timeout and extended result codes.
inline sqlite3* open_db(const std::string& path) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("store: cannot open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_extended_result_codes(db, 1);
  return db;
}

/// Commits on commit(), rolls back otherwise (an exception, a refused request).
class Txn {
 public:
  explicit Txn(sqlite3* db, const char* begin = "BEGIN IMMEDIATE") : db_(db) { exec(db_, begin); }
  ~Txn() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace lfs::sql

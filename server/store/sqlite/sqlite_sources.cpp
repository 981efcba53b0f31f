// SqliteSources: a run's source texts in their own SQLite file, sources.db,
// next to the run store (see SourceStore in store.hpp for why apart). One
// connection behind a mutex: sources are written once per run and read one
// file per page view, so there is nothing to gain from a reader pool.
#include <sqlite3.h>

#include <filesystem>
#include <mutex>

#include "store/store.hpp"

namespace lfs {
namespace {

class SqliteSources : public SourceStore {
 public:
  explicit SqliteSources(const std::string& dir) {
    std::filesystem::create_directories(dir);
    std::string path = (std::filesystem::path(dir) / "sources.db").string();
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw std::runtime_error("sources: cannot open " + path + ": " + msg);
    }
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec(
        "CREATE TABLE IF NOT EXISTS sources(run INTEGER NOT NULL, path TEXT NOT NULL, text BLOB "
        "NOT NULL,"
        " PRIMARY KEY(run, path)) WITHOUT ROWID");
  }
  ~SqliteSources() override { sqlite3_close(db_); }

  void put_sources(int64_t run, const std::vector<SourceFile>& files) override {
    std::lock_guard<std::mutex> lock(mu_);
    exec("BEGIN IMMEDIATE");
    try {
      Stmt q(db_, "INSERT OR REPLACE INTO sources(run, path, text) VALUES(?, ?, ?)");
      for (const SourceFile& f : files) {
        sqlite3_bind_int64(q.st, 1, run);
        sqlite3_bind_text(q.st, 2, f.path.data(), static_cast<int>(f.path.size()),
                          SQLITE_TRANSIENT);
        sqlite3_bind_blob(q.st, 3, f.text.data(), static_cast<int>(f.text.size()),
                          SQLITE_TRANSIENT);
        if (sqlite3_step(q.st) != SQLITE_DONE) fail("insert");
        sqlite3_reset(q.st);
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  std::optional<std::string> get_source(int64_t run, const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt q(db_, "SELECT text FROM sources WHERE run=? AND path=?");
    sqlite3_bind_int64(q.st, 1, run);
    sqlite3_bind_text(q.st, 2, path.data(), static_cast<int>(path.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(q.st) != SQLITE_ROW) return std::nullopt;
    const char* p = static_cast<const char*>(sqlite3_column_blob(q.st, 0));
    return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(q.st, 0)));
  }

  std::vector<std::pair<std::string, int64_t>> list_sources(int64_t run) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt q(db_, "SELECT path, length(text) FROM sources WHERE run=? ORDER BY path");
    sqlite3_bind_int64(q.st, 1, run);
    std::vector<std::pair<std::string, int64_t>> out;
    while (sqlite3_step(q.st) == SQLITE_ROW)
      out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q.st, 0)),
                       sqlite3_column_int64(q.st, 1));
    return out;
  }

  void drop_sources(int64_t run) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt q(db_, "DELETE FROM sources WHERE run=?");
    sqlite3_bind_int64(q.st, 1, run);
    if (sqlite3_step(q.st) != SQLITE_DONE) fail("delete");
  }

 private:
  struct Stmt {
    sqlite3_stmt* st = nullptr;
    Stmt(sqlite3* db, const char* sql) {
      if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK)
        throw std::runtime_error(std::string("sources: ") + sqlite3_errmsg(db));
    }
    ~Stmt() { sqlite3_finalize(st); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
  };
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("sources: ") + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }

  std::mutex mu_;
  sqlite3* db_ = nullptr;
};

}  // namespace

std::unique_ptr<SourceStore> open_sqlite_sources(const std::string& dir) {
  return std::make_unique<SqliteSources>(dir);
}

}  // namespace lfs

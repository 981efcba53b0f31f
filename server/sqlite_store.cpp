// SqliteStore: the Store on one SQLite file in WAL mode.
//
// One write connection behind a mutex (SQLite has one writer anyway) and a
// pool of read connections: in WAL mode readers see the last commit and are
// never blocked by a writer. Every write is one transaction, so a request is
// acknowledged only after COMMIT and a failed or half-received request
// leaves nothing. The schema is versioned with PRAGMA user_version.
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "luaflame/folded.hpp"
#include "luaflame/hash.hpp"
#include "luaflame/wire.hpp"
#include "store.hpp"

namespace lfs {

int metric_index(std::string_view name) {
  for (std::size_t i = 0; i < std::size(lfw::kMetrics); ++i)
    if (lfw::kMetrics[i] == name) return static_cast<int>(i);
  return -1;
}

std::string_view metric_name(int index) {
  if (index < 0 || index >= static_cast<int>(std::size(lfw::kMetrics))) return "?";
  return lfw::kMetrics[index];
}

std::string_view metric_units(int index) {
  static const char* units[] = {"samples", "ns", "calls", "bytes", "count", "bytes"};
  if (index < 0 || index >= 6) return "";
  return units[index];
}

namespace {

// Schema version 1 (SQL); later versions are C++ steps (see migrate()).
const char* const kSchemaV1 = 
    // 1: runs, tags, metrics, interned stacks, values per bucket, chunk seqs.
    R"(CREATE TABLE runs(
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         name TEXT NOT NULL, source TEXT NOT NULL, status TEXT NOT NULL,
         stream TEXT UNIQUE, started_ns INTEGER NOT NULL, ended_ns INTEGER NOT NULL,
         created_ns INTEGER NOT NULL, hz REAL NOT NULL DEFAULT 0, stats TEXT,
         stack_count INTEGER NOT NULL DEFAULT 0);
       CREATE INDEX runs_name ON runs(name, id);
       CREATE TABLE tags(run INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
         PRIMARY KEY(run, key)) WITHOUT ROWID;
       CREATE INDEX tags_kv ON tags(key, value, run);
       CREATE TABLE metrics(run INTEGER NOT NULL, metric INTEGER NOT NULL, total REAL NOT NULL DEFAULT 0,
         PRIMARY KEY(run, metric)) WITHOUT ROWID;
       CREATE TABLE stacks(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, hash INTEGER NOT NULL,
         text TEXT NOT NULL);
       CREATE INDEX stacks_hash ON stacks(run, hash);
       CREATE TABLE samples(run INTEGER NOT NULL, metric INTEGER NOT NULL, bucket INTEGER NOT NULL,
         stack INTEGER NOT NULL, value REAL NOT NULL,
         PRIMARY KEY(run, metric, bucket, stack)) WITHOUT ROWID;
       CREATE TABLE chunks(run INTEGER NOT NULL, seq INTEGER NOT NULL,
         PRIMARY KEY(run, seq)) WITHOUT ROWID;)";

// Version 2: frames interned per run; a stack is a varint string of frame ids.
const char* const kSchemaV2 = R"(
       CREATE TABLE frames(run INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL,
         PRIMARY KEY(run, id)) WITHOUT ROWID;
       CREATE TABLE stacks2(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, hash INTEGER NOT NULL,
         path BLOB NOT NULL);)";

void put_varint(std::string& out, uint32_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// Decodes a path blob; false when malformed (never expected).
bool decode_path(std::string_view blob, std::vector<uint32_t>& ids) {
  ids.clear();
  uint32_t v = 0;
  int shift = 0;
  for (unsigned char c : blob) {
    if (shift > 28) return false;
    v |= static_cast<uint32_t>(c & 0x7f) << shift;
    if (c & 0x80) { shift += 7; continue; }
    ids.push_back(v);
    v = 0;
    shift = 0;
  }
  return shift == 0;
}

// A run's frame dictionary while writing: names stored once, looked up by view.
struct FrameDict {
  std::deque<std::string> names;
  std::unordered_map<std::string_view, uint32_t> ids;
  void add(std::string_view name, uint32_t id) {
    names.emplace_back(name);
    ids.emplace(names.back(), id);
  }
  void clear() { ids.clear(); names.clear(); }
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// FNV-1a: the stacks table is looked up by (run, hash), then by text.
int64_t hash_text(std::string_view s) { return static_cast<int64_t>(lf::fnv1a(s)); }

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw std::runtime_error("store: " + what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

// A prepared statement with positional binds; reset on reuse.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) fail(db, sql);
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); return *this; }
  Stmt& bind(int i, int v) { sqlite3_bind_int64(st_, i, v); return *this; }
  Stmt& bind(int i, double v) { sqlite3_bind_double(st_, i, v); return *this; }
  Stmt& bind(int i, std::string_view v) {
    sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& blob(int i, std::string_view v) {
    sqlite3_bind_blob(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  std::string_view blob(int c) const {
    auto p = static_cast<const char*>(sqlite3_column_blob(st_, c));
    return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c))) : std::string_view();
  }
  Stmt& null(int i) { sqlite3_bind_null(st_, i); return *this; }
  /// True while there is a row.
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, "step");
  }
  void run() { while (step()) {} reset(); }
  void reset() { sqlite3_reset(st_); sqlite3_clear_bindings(st_); }
  int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
  double dbl(int c) const { return sqlite3_column_double(st_, c); }
  std::string_view text(int c) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, c))) : std::string_view();
  }
  bool is_null(int c) const { return sqlite3_column_type(st_, c) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error(std::string("store: ") + msg);
  }
}

sqlite3* open_db(const std::string& path) {
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

// Commits on commit(), rolls back otherwise (an exception, a refused request).
class Txn {
 public:
  explicit Txn(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~Txn() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() { exec(db_, "COMMIT"); done_ = true; }

 private:
  sqlite3* db_;
  bool done_ = false;
};

class SqliteStore : public Store {
 public:
  SqliteStore(const std::string& dir, const StoreOptions& opts) : opts_(opts) {
    std::filesystem::create_directories(dir);
    path_ = (std::filesystem::path(dir) / "luaflame.db").string();
    writer_ = open_db(path_);
    exec(writer_, "PRAGMA journal_mode=WAL");
    // FULL: a COMMIT is on disk before the request is acknowledged. NORMAL
    // (--sync normal): in the OS, which a kill -9 of the server cannot lose.
    exec(writer_, opts.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec(writer_, "PRAGMA foreign_keys=OFF");
    migrate();
  }
  ~SqliteStore() override { close(); }

  int64_t create_run(const NewRun& run, const Batch& data) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    int64_t id = insert_run(run);
    add_batch(id, data, /*fresh=*/true, 0);
    txn.commit();
    return id;
  }

  int64_t open_stream(const NewRun& run, bool& created) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    Stmt q(writer_, "SELECT id FROM runs WHERE stream=?");
    q.bind(1, run.stream);
    if (q.step()) {
      created = false;
      return q.i64(0);
    }
    int64_t id = insert_run(run);
    txn.commit();
    created = true;
    return id;
  }

  AppendStatus append(int64_t run, int64_t seq, const Batch& data) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    Stmt q(writer_, "SELECT status, stack_count FROM runs WHERE id=?");
    q.bind(1, run);
    if (!q.step()) return AppendStatus::not_found;
    if (q.text(0) != "live") return AppendStatus::finished;
    int64_t stack_count = q.i64(1);
    if (seq >= 0) {
      Stmt ins(writer_, "INSERT OR IGNORE INTO chunks(run, seq) VALUES(?, ?)");
      ins.bind(1, run).bind(2, seq).run();
      if (sqlite3_changes(writer_) == 0) return AppendStatus::duplicate;
    }
    add_batch(run, data, false, stack_count);
    txn.commit();
    return AppendStatus::ok;
  }

  bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    Stmt q(writer_,
           "UPDATE runs SET status='finished', stats=COALESCE(?, stats), ended_ns=MAX(ended_ns, ?) WHERE id=?");
    if (stats_json.empty()) q.null(1); else q.bind(1, stats_json);
    q.bind(2, ended_ns).bind(3, run).run();
    bool found = sqlite3_changes(writer_) > 0;
    txn.commit();
    return found;
  }

  std::optional<RunInfo> get_run(int64_t id) override {
    Reader r(*this);
    Stmt q(r.db, (std::string(kRunColumns) + " WHERE id=?").c_str());
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    RunInfo info = read_run(q);
    fill_run(r.db, info);
    return info;
  }

  RunList list_runs(const RunFilter& f) override {
    Reader r(*this);
    std::string where = " WHERE 1=1";
    if (!f.name.empty()) where += " AND name=?";
    if (!f.status.empty()) where += " AND status=?";
    for (std::size_t i = 0; i < f.tags.size(); ++i)
      where += " AND id IN (SELECT run FROM tags WHERE key=? AND value=?)";
    auto bind_filter = [&](Stmt& q) {
      int i = 1;
      if (!f.name.empty()) q.bind(i++, f.name);
      if (!f.status.empty()) q.bind(i++, f.status);
      for (const auto& [k, v] : f.tags) { q.bind(i++, k); q.bind(i++, v); }
      return i;
    };
    RunList out;
    Stmt count(r.db, ("SELECT COUNT(*) FROM runs" + where).c_str());
    bind_filter(count);
    if (count.step()) out.total = count.i64(0);
    Stmt q(r.db, (std::string(kRunColumns) + where + " ORDER BY id DESC LIMIT ? OFFSET ?").c_str());
    int i = bind_filter(q);
    q.bind(i, f.limit).bind(i + 1, f.offset);
    while (q.step()) out.runs.push_back(read_run(q));
    for (RunInfo& info : out.runs) fill_run(r.db, info);
    return out;
  }

  std::optional<int64_t> latest_run(const std::string& name, const Tags& tags, int64_t exclude) override {
    Reader r(*this);
    std::string sql = "SELECT id FROM runs WHERE name=? AND status='finished' AND id<>?";
    for (std::size_t i = 0; i < tags.size(); ++i)
      sql += " AND id IN (SELECT run FROM tags WHERE key=? AND value=?)";
    sql += " ORDER BY id DESC LIMIT 1";
    Stmt q(r.db, sql.c_str());
    q.bind(1, name).bind(2, exclude);
    int i = 3;
    for (const auto& [k, v] : tags) { q.bind(i++, k); q.bind(i++, v); }
    if (q.step()) return q.i64(0);
    return std::nullopt;
  }

  void read_stacks(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                   const std::function<void(std::string_view, double)>& fn) override {
    const std::vector<std::string>* names = nullptr;
    std::string text;
    read_paths(
        run, metric, from_ns, until_ns, [&](const std::vector<std::string>& n) { names = &n; },
        [&](const uint32_t* ids, std::size_t n, double v) {
          text.clear();
          for (std::size_t i = 0; i < n; ++i) {
            if (i) text += ';';
            text += (*names)[ids[i]];
          }
          fn(text, v);
        });
  }

  void read_paths(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                  const std::function<void(const std::vector<std::string>&)>& frames,
                  const std::function<void(const uint32_t*, std::size_t, double)>& fn) override {
    Reader r(*this);
    exec(r.db, "BEGIN");  // one snapshot for frames and stacks
    struct End { sqlite3* db; ~End() { sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr); } } end{r.db};
    std::vector<std::string> names;
    {
      Stmt f(r.db, "SELECT id, name FROM frames WHERE run=? ORDER BY id");
      f.bind(1, run);
      while (f.step()) {
        auto id = static_cast<std::size_t>(f.i64(0));
        if (id >= names.size()) names.resize(id + 1);
        names[id] = f.text(1);
      }
    }
    frames(names);
    Stmt q(r.db,
           "SELECT s.path, v.total FROM (SELECT stack, SUM(value) AS total FROM samples"
           " WHERE run=? AND metric=? AND bucket>=? AND bucket<? GROUP BY stack) v"
           " JOIN stacks s ON s.id=v.stack ORDER BY v.stack");
    q.bind(1, run).bind(2, metric).bind(3, from_ns).bind(4, until_ns);
    std::vector<uint32_t> ids;
    while (q.step()) {
      if (!decode_path(q.blob(0), ids)) continue;
      bool ok = true;
      for (uint32_t id : ids) ok = ok && id < names.size();
      if (ok && !ids.empty()) fn(ids.data(), ids.size(), q.dbl(1));
    }
  }

  std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns) override {
    Reader r(*this);
    Stmt q(r.db,
           "SELECT bucket, SUM(value) FROM samples WHERE run=? AND metric=? AND bucket>=? AND bucket<?"
           " GROUP BY bucket ORDER BY bucket");
    q.bind(1, run).bind(2, metric).bind(3, from_ns).bind(4, until_ns);
    std::vector<TimePoint> out;
    while (q.step()) out.push_back({q.i64(0), q.dbl(1)});
    return out;
  }

  bool delete_run(int64_t id) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    bool found = delete_locked(id);
    txn.commit();
    return found;
  }

  std::vector<int64_t> retain(int64_t older_than_ns, int64_t keep_runs, uint64_t budget) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    std::vector<int64_t> doomed;
    if (older_than_ns > 0) {
      Stmt q(writer_, "SELECT id FROM runs WHERE status='finished' AND ended_ns<?");
      q.bind(1, older_than_ns);
      while (q.step()) doomed.push_back(q.i64(0));
    }
    if (keep_runs > 0) {
      Stmt q(writer_, "SELECT id FROM runs WHERE status='finished' AND id < "
                      "(SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT ?))");
      q.bind(1, keep_runs);
      while (q.step()) doomed.push_back(q.i64(0));
    }
    // One transaction per run: the writer lock is released between them only
    // in the sense that each commit is short; readers are never blocked.
    std::vector<int64_t> deleted;
    for (int64_t id : doomed) {
      Txn txn(writer_);
      if (delete_locked(id)) deleted.push_back(id);
      txn.commit();
    }
    while (budget > 0 && static_cast<uint64_t>(used_bytes(writer_)) > budget) {
      int64_t id = 0;
      {
        Stmt q(writer_, "SELECT id FROM runs WHERE status='finished' ORDER BY id LIMIT 1");
        if (!q.step()) break;
        id = q.i64(0);
      }
      Txn txn(writer_);
      delete_locked(id);
      txn.commit();
      deleted.push_back(id);
    }
    return deleted;
  }

  StoreStats stats() override {
    Reader r(*this);
    StoreStats s;
    Stmt q(r.db, "SELECT COUNT(*), COALESCE(SUM(status='live'), 0) FROM runs");
    if (q.step()) { s.runs = q.i64(0); s.live_runs = q.i64(1); }
    s.stored_bytes = used_bytes(r.db);
    std::error_code ec;
    auto size = std::filesystem::file_size(path_, ec);
    if (!ec) s.file_bytes += static_cast<int64_t>(size);
    size = std::filesystem::file_size(path_ + "-wal", ec);
    if (!ec) s.file_bytes += static_cast<int64_t>(size);
    return s;
  }

  void close() override {
    std::lock_guard<std::mutex> lock(write_mu_);
    std::lock_guard<std::mutex> lock2(pool_mu_);
    if (!writer_) return;
    for (sqlite3* db : pool_) sqlite3_close(db);
    pool_.clear();
    sqlite3_exec(writer_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    sqlite3_close(writer_);
    writer_ = nullptr;
  }

 private:
  static constexpr const char* kRunColumns =
      "SELECT id, name, source, status, started_ns, ended_ns, hz, stats, stack_count FROM runs";

  // A read connection borrowed from the pool for one call.
  struct Reader {
    SqliteStore& s;
    sqlite3* db;
    explicit Reader(SqliteStore& st) : s(st), db(st.borrow()) {}
    ~Reader() { s.give_back(db); }
  };

  sqlite3* borrow() {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!writer_) throw std::runtime_error("store: closed");
      if (!pool_.empty()) {
        sqlite3* db = pool_.back();
        pool_.pop_back();
        return db;
      }
    }
    sqlite3* db = open_db(path_);
    exec(db, "PRAGMA query_only=1");
    return db;
  }

  void give_back(sqlite3* db) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!writer_ || pool_.size() >= 16) { sqlite3_close(db); return; }
    pool_.push_back(db);
  }

  void check_open() const {
    if (!writer_) throw std::runtime_error("store: closed");
  }

  void migrate() {
    Stmt v(writer_, "PRAGMA user_version");
    int version = v.step() ? static_cast<int>(v.i64(0)) : 0;
    v.reset();
    const int latest = 2;
    if (version > latest)
      throw std::runtime_error("store: " + path_ + " has schema version " + std::to_string(version) +
                               ", newer than this server's " + std::to_string(latest));
    for (int i = version; i < latest; ++i) {
      Txn txn(writer_);
      if (i == 0) exec(writer_, kSchemaV1);
      if (i == 1) migrate_v2();
      exec(writer_, ("PRAGMA user_version=" + std::to_string(i + 1)).c_str());
      txn.commit();
    }
  }

  // v1 kept each stack's text; v2 interns frames and keeps ids (same stack ids).
  void migrate_v2() {
    exec(writer_, kSchemaV2);
    {
      Stmt old(writer_, "SELECT id, run, text FROM stacks ORDER BY run, id");
      Stmt ins(writer_, "INSERT INTO stacks2(id, run, hash, path) VALUES(?, ?, ?, ?)");
      Stmt fr(writer_, "INSERT INTO frames(run, id, name) VALUES(?, ?, ?)");
      int64_t run = -1;
      FrameDict dict;
      std::string blob;
      while (old.step()) {
        if (old.i64(1) != run) { run = old.i64(1); dict.clear(); }
        blob.clear();
        for (std::string_view f : lf::split_stack(old.text(2))) put_varint(blob, frame_id(run, f, dict, fr));
        ins.bind(1, old.i64(0)).bind(2, run).bind(3, hash_text(blob)).blob(4, blob).run();
      }
    }
    exec(writer_, "DROP TABLE stacks; ALTER TABLE stacks2 RENAME TO stacks;"
                  " CREATE INDEX stacks_hash ON stacks(run, hash);");
  }

  static uint32_t frame_id(int64_t run, std::string_view name, FrameDict& dict, Stmt& ins) {
    auto it = dict.ids.find(name);
    if (it != dict.ids.end()) return it->second;
    auto id = static_cast<uint32_t>(dict.ids.size());
    ins.bind(1, run).bind(2, static_cast<int64_t>(id)).bind(3, name).run();
    dict.add(name, id);
    return id;
  }

  static int64_t used_bytes(sqlite3* db) {
    auto pragma = [db](const char* sql) {
      Stmt q(db, sql);
      return q.step() ? q.i64(0) : 0;
    };
    return (pragma("PRAGMA page_count") - pragma("PRAGMA freelist_count")) * pragma("PRAGMA page_size");
  }

  int64_t insert_run(const NewRun& run) {
    Stmt q(writer_,
           "INSERT INTO runs(name, source, status, stream, started_ns, ended_ns, created_ns, hz)"
           " VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    q.bind(1, run.name).bind(2, run.source).bind(3, std::string_view(run.finished ? "finished" : "live"));
    if (run.stream.empty()) q.null(4); else q.bind(4, run.stream);
    q.bind(5, run.started_ns).bind(6, std::max(run.ended_ns, run.started_ns)).bind(7, now_ns()).bind(8, run.hz);
    q.run();
    int64_t id = sqlite3_last_insert_rowid(writer_);
    Stmt tag(writer_, "INSERT INTO tags(run, key, value) VALUES(?, ?, ?)");
    for (const auto& [k, v] : run.tags) tag.bind(1, id).bind(2, k).bind(3, v).run();
    Stmt m(writer_, "INSERT OR IGNORE INTO metrics(run, metric, total) VALUES(?, ?, 0)");
    for (int metric : run.metrics) m.bind(1, id).bind(2, metric).run();
    return id;
  }

  // Interns every stack of `data` for `run` (frames first, then the stack as
  // frame ids) and adds its values to the bucket of data.from_ns. `fresh`:
  // the run has no frames or stacks yet, and the batch's stacks are distinct
  // (nothing to look up).
  void add_batch(int64_t run, const Batch& data, bool fresh, int64_t stack_count) {
    Stmt find(writer_, "SELECT id, path FROM stacks WHERE run=? AND hash=?");
    Stmt ins(writer_, "INSERT INTO stacks(run, hash, path) VALUES(?, ?, ?)");
    Stmt fr(writer_, "INSERT INTO frames(run, id, name) VALUES(?, ?, ?)");
    Stmt add(writer_,
             "INSERT INTO samples(run, metric, bucket, stack, value) VALUES(?, ?, ?, ?, ?)"
             " ON CONFLICT(run, metric, bucket, stack) DO UPDATE SET value=value+excluded.value");
    FrameDict dict;
    if (!fresh) {
      Stmt f(writer_, "SELECT id, name FROM frames WHERE run=?");
      f.bind(1, run);
      while (f.step()) dict.add(f.text(1), static_cast<uint32_t>(f.i64(0)));
    }
    const int64_t bucket = data.from_ns - data.from_ns % opts_.bucket_ns;
    std::vector<double> totals(data.metrics.size(), 0.0);
    std::string blob;
    std::unordered_map<std::string, int64_t> seen;
    // Neighbouring stacks share prefixes: reuse the previous stack's ids for
    // the common prefix instead of hashing those frames again.
    std::vector<std::string_view> prev_frames;
    std::vector<uint32_t> prev_ids;
    for (const auto& [text, values] : data.stacks) {
      blob.clear();
      std::vector<std::string_view> frames = lf::split_stack(text);
      std::size_t same = 0;
      while (same < frames.size() && same < prev_frames.size() && frames[same] == prev_frames[same]) ++same;
      prev_ids.resize(frames.size());
      for (std::size_t i = same; i < frames.size(); ++i) prev_ids[i] = frame_id(run, frames[i], dict, fr);
      for (uint32_t id : prev_ids) put_varint(blob, id);
      prev_frames = std::move(frames);
      const int64_t h = hash_text(blob);
      int64_t sid = 0;
      if (fresh) {  // distinct stacks expected; a repeat is merged here, not looked up
        auto it = seen.find(blob);
        if (it != seen.end()) sid = it->second;
      } else {
        find.bind(1, run).bind(2, h);
        while (find.step())
          if (find.blob(1) == blob) sid = find.i64(0);
        find.reset();
      }
      if (sid == 0) {
        if (static_cast<std::size_t>(++stack_count) > opts_.max_stacks)
          throw LimitError("a run holds at most " + std::to_string(opts_.max_stacks) + " distinct stacks");
        ins.bind(1, run).bind(2, h).blob(3, blob).run();
        sid = sqlite3_last_insert_rowid(writer_);
        if (fresh) seen.emplace(blob, sid);
      }
      for (std::size_t c = 0; c < data.metrics.size() && c < values.size(); ++c) {
        if (values[c] == 0) continue;
        add.bind(1, run).bind(2, data.metrics[c]).bind(3, bucket).bind(4, sid).bind(5, values[c]).run();
        totals[c] += values[c];
      }
    }
    Stmt tot(writer_,
             "INSERT INTO metrics(run, metric, total) VALUES(?, ?, ?)"
             " ON CONFLICT(run, metric) DO UPDATE SET total=total+excluded.total");
    for (std::size_t c = 0; c < data.metrics.size(); ++c) tot.bind(1, run).bind(2, data.metrics[c]).bind(3, totals[c]).run();
    Stmt upd(writer_,
             "UPDATE runs SET stack_count=?, ended_ns=MAX(ended_ns, ?),"
             " started_ns=CASE WHEN ?>0 AND ?<started_ns THEN ? ELSE started_ns END WHERE id=?");
    upd.bind(1, stack_count).bind(2, data.until_ns).bind(3, data.from_ns).bind(4, data.from_ns)
        .bind(5, data.from_ns).bind(6, run).run();
  }

  bool delete_locked(int64_t id) {
    static const char* const tables[] = {"samples", "stacks", "frames", "tags", "metrics", "chunks"};
    for (const char* t : tables) {
      Stmt q(writer_, (std::string("DELETE FROM ") + t + " WHERE run=?").c_str());
      q.bind(1, id).run();
    }
    Stmt q(writer_, "DELETE FROM runs WHERE id=?");
    q.bind(1, id).run();
    return sqlite3_changes(writer_) > 0;
  }

  static RunInfo read_run(const Stmt& q) {
    RunInfo r;
    r.id = q.i64(0);
    r.name = q.text(1);
    r.source = q.text(2);
    r.status = q.text(3);
    r.started_ns = q.i64(4);
    r.ended_ns = q.i64(5);
    r.hz = q.dbl(6);
    if (!q.is_null(7)) r.stats_json = q.text(7);
    r.stack_count = q.i64(8);
    return r;
  }

  static void fill_run(sqlite3* db, RunInfo& r) {
    Stmt t(db, "SELECT key, value FROM tags WHERE run=?");
    t.bind(1, r.id);
    while (t.step()) r.tags.emplace(t.text(0), t.text(1));
    Stmt m(db, "SELECT metric, total FROM metrics WHERE run=? ORDER BY metric");
    m.bind(1, r.id);
    while (m.step()) r.totals[static_cast<int>(m.i64(0))] = m.dbl(1);
  }

  StoreOptions opts_;
  std::string path_;
  sqlite3* writer_ = nullptr;
  std::mutex write_mu_;
  std::mutex pool_mu_;
  std::vector<sqlite3*> pool_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& dir, const StoreOptions& opts) {
  return std::make_unique<SqliteStore>(dir, opts);
}

}  // namespace lfs

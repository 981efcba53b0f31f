// SqliteStore: the Store on one SQLite file in WAL mode.
//
// One write connection behind a mutex (SQLite has one writer anyway) and a
// pool of read connections: in WAL mode readers see the last commit and are
// never blocked by a writer. Every write is one transaction, so a request is
// acknowledged only after COMMIT and a failed or half-received request
// leaves nothing. Values live in blobs per (run, metric, resolution, bucket)
// (batch.hpp's codec), a few parts each, so a read costs the buckets it touches, and a
// write adds a part to one bucket per resolution plus the run's merged tree (resolution 0).
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "batch.hpp"
#include "sqlite_list.hpp"
#include "sqlite_schema.hpp"
#include "sqlite_util.hpp"
#include "store.hpp"

namespace lfs {

namespace {

using sql::exec;
using sql::open_db;
using sql::Stmt;
using sql::Txn;

constexpr int64_t kWhole = 0;  // the width under which a run's merged tree is kept
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// Live runs' dictionaries kept in memory by the writer, in nodes.
constexpr std::size_t kTreeCacheNodes = 8u << 20;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads a run's dictionary (frames and nodes, appended in blobs) on `db`.
void load_dict(sqlite3* db, int64_t run, std::vector<std::string>& frames,
               std::vector<Batch::Node>& nodes) {
  Stmt q(db, "SELECT kind, data FROM dict WHERE run=? ORDER BY kind, first");
  q.bind(1, run);
  while (q.step()) {
    if (q.i64(0) == 0)
      decode_frames(q.blob(1), frames);
    else if (!decode_nodes(q.blob(1), nodes))
      throw std::runtime_error("store: run " + std::to_string(run) + ": bad node blob");
  }
  for (const Batch::Node& n : nodes)
    if (n.frame >= frames.size())
      throw std::runtime_error("store: run " + std::to_string(run) + ": node names no frame");
}

class SqliteStore : public Store {
 public:
  SqliteStore(const std::string& dir, const StoreOptions& opts) : opts_(opts) {
    if (opts_.resolutions.empty()) throw std::runtime_error("store: no resolutions");
    std::filesystem::create_directories(dir);
    path_ = (std::filesystem::path(dir) / "luaflame.db").string();
    writer_ = open_db(path_);
    // Incremental vacuum gives space back after retention; it must be chosen before the
    // file's header is written (journal_mode=WAL writes it). An older store gets it with one
    // VACUUM after migrating.
    if (sql::pragma(writer_, "PRAGMA page_count") == 0)
      exec(writer_, "PRAGMA auto_vacuum=INCREMENTAL");
    exec(writer_, "PRAGMA journal_mode=WAL");
    // FULL: a COMMIT is on disk before the request is acknowledged. NORMAL
    // (--sync normal): in the OS, which a kill -9 of the server cannot lose.
    exec(writer_, opts.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec(writer_, "PRAGMA foreign_keys=OFF");
    // After a checkpoint resets the WAL, truncate it back to 64 MiB (a big write grows it).
    exec(writer_, "PRAGMA journal_size_limit=67108864");
    wc_.reset(writer_);
    bool converted = migrate_schema(writer_, path_, [this](int64_t run, const Batch& b) {
      RunTree& tree = tree_of(run);
      add_batch(run, b, tree, true);
    });
    trees_.clear();
    if (converted) {
      exec(writer_, "PRAGMA auto_vacuum=INCREMENTAL");
      exec(writer_, "VACUUM");
    }
  }
  // Not close(): a virtual call from a destructor would not dispatch past this class (and the
  // analyzer's optin.cplusplus.VirtualCall flags it); both share shut().
  ~SqliteStore() override { shut(); }

  using Store::create_run;
  int64_t create_run(const NewRun& run, Batch&& data) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    int64_t id = insert_run(run);
    RunTree tree;  // an upload's tree is not kept: the run never changes
    add_batch(id, data, tree, /*all_resolutions=*/false, &data);
    txn.commit();
    return id;
  }

  int64_t open_stream(const NewRun& run, bool& created) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    {
      Stmt q(wc_, "SELECT id FROM runs WHERE stream=?");
      q.bind(1, run.stream);
      if (q.step()) {
        created = false;
        return q.i64(0);
      }
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
    {
      // Reset before COMMIT (by the end of this scope): a read left open on the writer
      // made every automatic checkpoint fail, and the WAL grew without bound.
      Stmt q(wc_, "SELECT status FROM runs WHERE id=?");
      q.bind(1, run);
      if (!q.step()) return AppendStatus::not_found;
      if (q.text(0) != "live") return AppendStatus::finished;
    }
    if (seq >= 0) {
      Stmt ins(wc_, "INSERT OR IGNORE INTO chunks(run, seq) VALUES(?, ?)");
      ins.bind(1, run).bind(2, seq).run();
      if (sqlite3_changes(writer_) == 0) return AppendStatus::duplicate;
    }
    try {
      add_batch(run, data, tree_of(run), true);
      txn.commit();
    } catch (...) {
      trees_.erase(run);  // half-mapped: reloaded from the database next time
      throw;
    }
    return AppendStatus::ok;
  }

  bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    Txn txn(writer_);
    Stmt q(writer_,
           "UPDATE runs SET status='finished', stats=COALESCE(?, stats), ended_ns=MAX(ended_ns, ?),"
           " revision=revision+1 WHERE id=?");
    if (stats_json.empty())
      q.null(1);
    else
      q.bind(1, stats_json);
    q.bind(2, ended_ns).bind(3, run).run();
    bool found = sqlite3_changes(writer_) > 0;
    txn.commit();
    trees_.erase(run);
    return found;
  }

  std::optional<RunInfo> get_run(int64_t id) override {
    Reader r(*this);
    Stmt q(r.db, std::string(kSqliteRunColumns) + " FROM runs WHERE id=?");
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    RunInfo info = sqlite_read_run(q);
    q.reset();
    sqlite_fill_run(r.db, info);
    return info;
  }

  RunList list_runs(const RunFilter& f) override;

  std::optional<int64_t> latest_run(const std::string& name, const Tags& tags,
                                    int64_t exclude) override {
    Reader r(*this);
    std::string sql = "SELECT id FROM runs WHERE name=? AND status='finished' AND id<>?";
    for (std::size_t i = 0; i < tags.size(); ++i)
      sql += " AND EXISTS (SELECT 1 FROM tags WHERE run=runs.id AND key=? AND value=?)";
    sql += " ORDER BY id DESC LIMIT 1";
    Stmt q(r.db, sql);
    q.bind(1, name).bind(2, exclude);
    int i = 3;
    for (const auto& [k, v] : tags) {
      q.bind(i++, k);
      q.bind(i++, v);
    }
    std::optional<int64_t> out;
    if (q.step()) out = q.i64(0);
    q.reset();
    return out;
  }

  void read_tree(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                 StoredTree& out) override {
    Reader r(*this);
    Txn snapshot(r.db, "BEGIN");  // one snapshot for the dictionary and the values
    out = StoredTree{};
    load_dict(r.db, run, out.frames, out.nodes);
    std::vector<int64_t> dense(out.nodes.size(), 0);
    auto read = [&](int64_t width, int64_t lo, int64_t hi) {
      Stmt q(r.db,
             "SELECT data FROM buckets WHERE run=? AND metric=? AND width=? AND bucket>=? AND "
             "bucket<?");
      q.bind(1, run).bind(2, metric).bind(3, width).bind(4, lo).bind(5, hi);
      while (q.step())
        if (!add_blob(q.blob(0), dense))
          throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
    };
    if (from_ns == kMin && until_ns == kMax) {
      read(kWhole, kMin, kMax);
    } else {
      for (const Piece& p :
           cover(from_ns, until_ns, opts_.resolutions, horizons(r.db, run, metric)))
        read(opts_.resolutions[static_cast<std::size_t>(p.level)].width_ns, p.lo, p.hi);
    }
    for (std::size_t i = 0; i < dense.size(); ++i)
      if (dense[i] != 0) out.values.emplace_back(static_cast<uint32_t>(i), dense[i]);
    snapshot.commit();
  }

  std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                                  int64_t step_ns) override {
    Reader r(*this);
    Txn snapshot(r.db, "BEGIN");
    const std::vector<int64_t> horizon = horizons(r.db, run, metric);
    std::size_t level = 0;
    for (std::size_t l = 0; l < opts_.resolutions.size(); ++l)
      if (opts_.resolutions[l].width_ns <= step_ns) level = l;
    while (level > 0 && horizon[level] == kMax) --level;  // an upload keeps its finest bucket only
    std::vector<TimePoint> out;
    // From the chosen level where it still holds data; before its horizon, coarser levels.
    int64_t until = until_ns;
    for (std::size_t l = level; l < opts_.resolutions.size() && from_ns < until; ++l) {
      const int64_t w = opts_.resolutions[l].width_ns;
      const int64_t lo = std::max(from_ns, horizon[l] == kMax ? until : horizon[l]);
      Stmt q(r.db,
             "SELECT bucket, SUM(total) FROM buckets WHERE run=? AND metric=? AND width=? AND "
             "bucket>=? AND bucket<? GROUP BY bucket ORDER BY bucket DESC");  // a bucket's parts
      q.bind(1, run).bind(2, metric).bind(3, w).bind(4, lo).bind(5, until);
      while (q.step()) out.push_back({q.i64(0), w, q.i64(1)});
      if (horizon[l] != kMax) until = std::min(until, horizon[l]);
      until = bucket_of(until,
                        opts_.resolutions[std::min(l + 1, opts_.resolutions.size() - 1)].width_ns);
    }
    std::reverse(out.begin(), out.end());
    snapshot.commit();
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

  RetainResult retain(const RetainOptions& o) override;
  int64_t give_back_space() override {
    std::lock_guard<std::mutex> lock(write_mu_);
    check_open();
    return give_back_locked();
  }

  StoreStats stats() override {
    Reader r(*this);
    StoreStats s;
    {
      Stmt q(r.db, "SELECT status, n FROM run_counts");
      while (q.step()) {
        s.runs += q.i64(1);
        if (q.text(0) == "live") s.live_runs = q.i64(1);
      }
    }
    s.stored_bytes = used_bytes(r.db);
    std::error_code ec;
    auto size = std::filesystem::file_size(path_, ec);
    if (!ec) s.file_bytes += static_cast<int64_t>(size);
    size = std::filesystem::file_size(path_ + "-wal", ec);
    if (!ec) s.file_bytes += static_cast<int64_t>(size);
    return s;
  }

  void close() override { shut(); }

 private:
  int64_t give_back_locked();
  // Closes the readers and the writer (after checkpointing the WAL); once.
  void shut() {
    std::lock_guard<std::mutex> lock(write_mu_);
    std::lock_guard<std::mutex> lock2(pool_mu_);
    if (!writer_) return;
    for (sqlite3* db : pool_) sqlite3_close(db);
    pool_.clear();
    trees_.clear();
    wc_.clear();
    sqlite3_exec(writer_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    sqlite3_close(writer_);
    writer_ = nullptr;
  }

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
    // Reads map the file (no copy per page) and keep 16 MiB of parsed pages per connection:
    // a filtered listing at a million runs looks up thousands of rows.
    exec(db, "PRAGMA mmap_size=1073741824");
    exec(db, "PRAGMA cache_size=-16384");
    return db;
  }

  void give_back(sqlite3* db) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!writer_ || pool_.size() >= 16) {
      sqlite3_close(db);
      return;
    }
    pool_.push_back(db);
  }

  void check_open() const {
    if (!writer_) throw std::runtime_error("store: closed");
  }

  static int64_t used_bytes(sqlite3* db) {
    return (sql::pragma(db, "PRAGMA page_count") - sql::pragma(db, "PRAGMA freelist_count")) *
           sql::pragma(db, "PRAGMA page_size");
  }

  // First bucket start each resolution still holds for (run, metric); kMax when none.
  std::vector<int64_t> horizons(sqlite3* db, int64_t run, int metric) const {
    std::vector<int64_t> out;
    Stmt q(db, "SELECT MIN(bucket) FROM buckets WHERE run=? AND metric=? AND width=?");
    for (const Resolution& res : opts_.resolutions) {
      q.bind(1, run).bind(2, metric).bind(3, res.width_ns);
      out.push_back(q.step() && !q.is_null(0) ? q.i64(0) : kMax);
      q.reset();
    }
    return out;
  }

  // The writer's dictionary of a run: cached while the run streams, else loaded.
  RunTree& tree_of(int64_t run) {
    auto it = trees_.find(run);
    if (it != trees_.end()) return it->second;
    std::size_t cached = 0;
    for (const auto& [id, t] : trees_) cached += t.nodes.size();
    if (cached > kTreeCacheNodes) trees_.clear();
    RunTree& tree = trees_[run];
    std::vector<std::string> frames;
    std::vector<Batch::Node> nodes;
    load_dict(writer_, run, frames, nodes);
    for (std::string& f : frames) tree.add_frame(std::move(f));
    for (const Batch::Node& n : nodes) tree.add_node(n.parent, n.frame);
    // Stacks: nodes with a value in the run's merged tree.
    Stmt q(writer_, "SELECT data FROM buckets WHERE run=? AND width=0");
    q.bind(1, run);
    std::vector<int64_t> any(tree.nodes.size(), 0);
    while (q.step()) add_blob(q.blob(0), any);
    for (std::size_t i = 0; i < any.size(); ++i) tree.valued[i] = any[i] != 0;
    Stmt s(writer_, "SELECT stack_count FROM runs WHERE id=?");
    s.bind(1, run);
    tree.stack_count = s.step() ? s.i64(0) : 0;
    s.reset();
    return tree;
  }

  int64_t insert_run(const NewRun& run) {
    Stmt q(wc_,
           "INSERT INTO runs(name, source, status, stream, started_ns, ended_ns, created_ns, hz)"
           " VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    q.bind(1, run.name)
        .bind(2, run.source)
        .bind(3, std::string_view(run.finished ? "finished" : "live"));
    if (run.stream.empty())
      q.null(4);
    else
      q.bind(4, run.stream);
    q.bind(5, run.started_ns)
        .bind(6, std::max(run.ended_ns, run.started_ns))
        .bind(7, now_ns())
        .bind(8, run.hz);
    q.run();
    int64_t id = sqlite3_last_insert_rowid(writer_);
    Stmt tag(wc_, "INSERT INTO tags(run, key, value, name) VALUES(?, ?, ?, ?)");
    for (const auto& [k, v] : run.tags)
      tag.bind(1, id).bind(2, k).bind(3, v).bind(4, run.name).run();
    Stmt m(wc_, "INSERT OR IGNORE INTO metrics(run, metric, total) VALUES(?, ?, 0)");
    for (int metric : run.metrics) m.bind(1, id).bind(2, metric).run();
    return id;
  }

  void add_batch(int64_t run, const Batch& b, RunTree& tree, bool all_resolutions,
                 Batch* owner = nullptr);
  void merge_bucket(int64_t run, int metric, int64_t width, int64_t bucket, const Values& add,
                    int64_t sum, int sign);
  int64_t trim(const RetainOptions& o, std::vector<int64_t>& changed);

  bool delete_locked(int64_t id) {
    static const char* const tables[] = {"buckets", "dict", "tags", "metrics", "chunks"};
    for (const char* t : tables) {
      Stmt q(writer_, std::string("DELETE FROM ") + t + " WHERE run=?");
      q.bind(1, id).run();
    }
    Stmt q(writer_, "DELETE FROM runs WHERE id=?");
    q.bind(1, id).run();
    trees_.erase(id);
    return sqlite3_changes(writer_) > 0;
  }

  StoreOptions opts_;
  std::string path_;
  sqlite3* writer_ = nullptr;
  std::mutex write_mu_;
  std::mutex pool_mu_;
  std::vector<sqlite3*> pool_;
  std::unordered_map<int64_t, RunTree> trees_;  // writer only (under write_mu_)
  sql::StmtCache wc_;                           // the writer's statements (under write_mu_)
};

RunList SqliteStore::list_runs(const RunFilter& f) {
  Reader r(*this);
  return sqlite_list_runs(r.db, f);
}

// Adds `b` to `run` inside the open transaction: the dictionary rows the run lacked, then
// per metric the values merged into one bucket per resolution (the finest only unless
// all_resolutions) and into the merged tree.
// Every sum is checked before anything is written: all values are >= 0, so a run total
// that fits bounds every bucket and node sum under it.
void SqliteStore::add_batch(int64_t run, const Batch& b, RunTree& tree, bool all_resolutions,
                            Batch* owner) {
  check_batch(b);
  const std::size_t cols = b.metrics.size();
  const std::size_t f0 = tree.frames.size(), n0 = tree.nodes.size();
  std::vector<uint32_t> node_of;
  tree.map(b, opts_.max_stacks, node_of, owner);
  std::string blob;
  Stmt dict(wc_, "INSERT INTO dict(run, kind, first, data) VALUES(?, ?, ?, ?)");
  // Frames in rows of at most 4 MiB: a batch of large names is never one blob
  // that SQLite copies twice more (issue 31: 60,000 names of 1 KB).
  for (std::size_t first = f0, next = 0; first < tree.frames.size(); first = next) {
    blob.clear();
    next = encode_frames(tree.frames, first, blob, 4u << 20);
    dict.bind(1, run).bind(2, 0).bind(3, static_cast<int64_t>(first)).blob(4, blob).run();
  }
  if (tree.nodes.size() > n0) {
    blob.clear();
    encode_nodes(tree.nodes, n0, blob);
    dict.bind(1, run).bind(2, 1).bind(3, static_cast<int64_t>(n0)).blob(4, blob).run();
  }
  Values vals;
  for (std::size_t c = 0; c < cols; ++c) {
    const int64_t sum = column_values(b, c, node_of, vals);
    if (vals.empty()) continue;
    const int metric = b.metrics[c];
    {
      Stmt t(wc_, "SELECT total FROM metrics WHERE run=? AND metric=?");
      t.bind(1, run).bind(2, metric);
      const int64_t total = t.step() ? t.i64(0) : 0;
      t.reset();
      Stmt u(wc_,
             "INSERT INTO metrics(run, metric, total) VALUES(?, ?, ?)"
             " ON CONFLICT(run, metric) DO UPDATE SET total=excluded.total");
      u.bind(1, run).bind(2, metric).bind(3, checked_add(total, sum, "the run's total")).run();
    }
    // An upload is one window that never grows: its finest bucket serves every range (cover()
    // skips resolutions a run has no buckets in).
    for (const Resolution& res : opts_.resolutions) {
      merge_bucket(run, metric, res.width_ns, bucket_of(b.from_ns, res.width_ns), vals, sum, 1);
      if (!all_resolutions) break;
    }
    merge_bucket(run, metric, kWhole, 0, vals, sum, 1);
  }
  Stmt upd(wc_,
           "UPDATE runs SET stack_count=?, revision=revision+1, ended_ns=MAX(ended_ns, ?),"
           " started_ns=CASE WHEN ?>0 AND ?<started_ns THEN ? ELSE started_ns END WHERE id=?");
  upd.bind(1, tree.stack_count)
      .bind(2, b.until_ns)
      .bind(3, b.from_ns)
      .bind(4, b.from_ns)
      .bind(5, b.from_ns)
      .bind(6, run)
      .run();
}

// Adds (sign 1) or subtracts (-1) sorted `add` to one bucket, kept as parts (batch.hpp,
// parts_to_merge): an addition writes its values as a new part and merges only the newest
// parts that are not much bigger than it, so a chunk costs about its own size, not the
// bucket's (the whole bucket was decoded and re-encoded per chunk: issue 11). A subtraction
// (retention) needs the whole bucket: every part is merged into one.
void SqliteStore::merge_bucket(int64_t run, int metric, int64_t width, int64_t bucket,
                               const Values& add, int64_t sum, int sign) {
  std::vector<int64_t> ids, sizes, totals;
  {
    Stmt q(wc_,
           "SELECT id, length(data), total FROM buckets WHERE run=? AND metric=? AND width=? AND "
           "bucket=? ORDER BY id");
    q.bind(1, run).bind(2, metric).bind(3, width).bind(4, bucket);
    while (q.step()) {
      ids.push_back(q.i64(0));
      sizes.push_back(q.i64(1));
      totals.push_back(q.i64(2));
    }
  }
  std::string data;
  std::size_t k = ids.size();
  if (sign > 0) {
    encode_values(add, data);
    k = parts_to_merge(sizes, static_cast<int64_t>(data.size()));
  }
  int64_t total = sign > 0 ? sum : 0;
  if (k > 0) {
    Values cur;
    total = 0;
    Stmt r(wc_, "SELECT data FROM buckets WHERE id=?");
    Stmt d(wc_, "DELETE FROM buckets WHERE id=?");
    for (std::size_t i = ids.size() - k; i < ids.size(); ++i) {
      r.bind(1, ids[i]);
      if (!r.step() || !merge_blob(r.blob(0), cur))
        throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
      r.reset();
      total = checked_add(total, totals[i], "a bucket's total");
      d.bind(1, ids[i]).run();
    }
    total = merged_total(total, sum, sign);
    merge_values(cur, add, sign);
    data.clear();
    encode_values(cur, data);
    if (cur.empty()) return;  // nothing left: the bucket is gone
  }
  Stmt w(wc_,
         "INSERT INTO buckets(run, metric, width, bucket, total, data) VALUES(?, ?, ?, ?, ?, ?)");
  w.bind(1, run).bind(2, metric).bind(3, width).bind(4, bucket).bind(5, total).blob(6, data).run();
}

// Per-resolution retention of streamed and ingested runs (uploads are one bucket and follow
// the whole-run rules). Dropping the coarsest resolution's buckets also takes their values out
// of the merged tree and the run's totals, so the whole-run view is what is retained.
int64_t SqliteStore::trim(const RetainOptions& o, std::vector<int64_t>& changed) {
  int64_t trimmed = 0;
  for (std::size_t l = 0; l < opts_.resolutions.size(); ++l) {
    const Resolution& res = opts_.resolutions[l];
    if (res.keep_ns <= 0) continue;
    const bool coarsest = l + 1 == opts_.resolutions.size();
    const int64_t cutoff =
        o.now_ns - res.keep_ns - res.width_ns;  // buckets that ended before now - keep
    Txn txn(writer_);
    if (coarsest) {
      Stmt q(writer_,
             "SELECT b.run, b.metric, b.total, b.data FROM buckets b JOIN runs r ON r.id=b.run"
             " WHERE b.width=? AND b.bucket<? AND r.source<>'upload' ORDER BY b.run, b.metric");
      q.bind(1, res.width_ns).bind(2, cutoff);
      std::vector<Removed> subs;
      while (q.step()) add_removed(subs, q.i64(0), static_cast<int>(q.i64(1)), q.i64(2), q.blob(3));
      for (const Removed& s : subs) {
        merge_bucket(s.run, s.metric, kWhole, 0, s.v, s.sum, -1);
        Stmt u(writer_, "UPDATE metrics SET total=total-? WHERE run=? AND metric=?");
        u.bind(1, s.sum).bind(2, s.run).bind(3, s.metric).run();
      }
    }
    std::vector<int64_t> runs;
    {
      Stmt q(writer_,
             "SELECT DISTINCT b.run FROM buckets b JOIN runs r ON r.id=b.run"
             " WHERE b.width=? AND b.bucket<? AND r.source<>'upload'");
      q.bind(1, res.width_ns).bind(2, cutoff);
      while (q.step()) runs.push_back(q.i64(0));
    }
    Stmt d(writer_, "DELETE FROM buckets WHERE width=? AND bucket<? AND run=?");
    Stmt rev(writer_, "UPDATE runs SET revision=revision+1 WHERE id=?");
    for (int64_t run : runs) {
      d.bind(1, res.width_ns).bind(2, cutoff).bind(3, run).run();
      trimmed += sqlite3_changes(writer_);
      rev.bind(1, run).run();  // cached views of it are stale
      changed.push_back(run);
    }
    txn.commit();
  }
  return trimmed;
}

// Under write_mu_: gives the freed pages back to the file system, then lets
// the WAL restart.
int64_t SqliteStore::give_back_locked() {
  const int64_t free_pages = sql::pragma(writer_, "PRAGMA freelist_count");
  if (free_pages <= 0) return 0;
  exec(writer_, "PRAGMA incremental_vacuum");
  const int64_t freed = (free_pages - sql::pragma(writer_, "PRAGMA freelist_count")) *
                        sql::pragma(writer_, "PRAGMA page_size");
  sqlite3_exec(writer_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  return freed;
}

RetainResult SqliteStore::retain(const RetainOptions& o) {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  RetainResult out;
  std::vector<int64_t> doomed;
  if (o.older_than_ns > 0) {
    Stmt q(writer_, "SELECT id FROM runs WHERE status='finished' AND ended_ns<?");
    q.bind(1, o.older_than_ns);
    while (q.step()) doomed.push_back(q.i64(0));
  }
  if (o.keep_runs > 0) {
    Stmt q(writer_,
           "SELECT id FROM runs WHERE status='finished' AND id < "
           "(SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT ?))");
    q.bind(1, o.keep_runs);
    while (q.step()) doomed.push_back(q.i64(0));
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());
  // One short transaction per run: readers are never blocked, writers wait briefly.
  for (int64_t id : doomed) {
    Txn txn(writer_);
    if (delete_locked(id)) out.deleted.push_back(id);
    txn.commit();
  }
  if (o.trim) {
    out.buckets_trimmed = trim(o, out.trimmed);
    std::sort(out.trimmed.begin(), out.trimmed.end());
    out.trimmed.erase(std::unique(out.trimmed.begin(), out.trimmed.end()), out.trimmed.end());
  }
  while (o.budget_bytes > 0 && static_cast<uint64_t>(used_bytes(writer_)) > o.budget_bytes) {
    int64_t id = 0;
    {
      Stmt q(writer_, "SELECT id FROM runs WHERE status='finished' ORDER BY id LIMIT 1");
      if (!q.step()) break;
      id = q.i64(0);
      q.reset();
    }
    Txn txn(writer_);
    delete_locked(id);
    txn.commit();
    out.deleted.push_back(id);
  }
  out.bytes_freed = give_back_locked();
  return out;
}

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& dir, const StoreOptions& opts) {
  return std::make_unique<SqliteStore>(dir, opts);
}

}  // namespace lfs

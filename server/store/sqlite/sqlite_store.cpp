// SqliteStore (sqlite_store.hpp): the file, its connections and the writes.
//
// Every write is one transaction, so a request is
// acknowledged only after COMMIT and a failed or half-received request
// leaves nothing. Values live in blobs per (run, metric, resolution, bucket)
// (batch.hpp's codec), a few parts each, so a read costs the buckets it touches, and a
// write adds a part to one bucket per resolution plus the run's merged tree (resolution 0).
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "store/sqlite/sqlite_schema.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace lfs {

namespace {

using sql::exec;
using sql::open_db;
using sql::Stmt;
using sql::Txn;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void SqliteStore::load_dict(sqlite3* db, int64_t run, std::vector<std::string>& frames,
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

SqliteStore::SqliteStore(const std::string& dir, const StoreOptions& opts) : opts_(opts) {
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

// Closes the readers and the writer (after checkpointing the WAL); once.
void SqliteStore::shut() {
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

sqlite3* SqliteStore::borrow() {
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

void SqliteStore::give_back(sqlite3* db) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!writer_ || pool_.size() >= 16) {
    sqlite3_close(db);
    return;
  }
  pool_.push_back(db);
}

int64_t SqliteStore::create_run(const NewRun& run, Batch&& data) {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  Txn txn(writer_);
  int64_t id = insert_run(run);
  RunTree tree;  // an upload's tree is not kept: the run never changes
  add_batch(id, data, tree, /*all_resolutions=*/false, &data);
  txn.commit();
  return id;
}

int64_t SqliteStore::open_stream(const NewRun& run, bool& created) {
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

AppendStatus SqliteStore::append(int64_t run, int64_t seq, const Batch& data) {
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
    Stmt touch(wc_, "UPDATE runs SET touched_ns=? WHERE id=?");
    touch.bind(1, now_ns()).bind(2, run).run();
    txn.commit();
  } catch (...) {
    trees_.erase(run);  // half-mapped: reloaded from the database next time
    throw;
  }
  return AppendStatus::ok;
}

bool SqliteStore::finish(int64_t run, const std::string& stats_json, int64_t ended_ns) {
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

bool SqliteStore::delete_run(int64_t id) {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  Txn txn(writer_);
  bool found = delete_locked(id);
  txn.commit();
  return found;
}

bool SqliteStore::delete_locked(int64_t id) {
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

int64_t SqliteStore::insert_run(const NewRun& run) {
  Stmt q(wc_,
         "INSERT INTO runs(name, source, status, stream, started_ns, ended_ns, created_ns, hz,"
         " touched_ns) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?7)");
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
  for (const auto& [k, v] : run.tags) tag.bind(1, id).bind(2, k).bind(3, v).bind(4, run.name).run();
  Stmt m(wc_, "INSERT OR IGNORE INTO metrics(run, metric, total) VALUES(?, ?, 0)");
  for (int metric : run.metrics) m.bind(1, id).bind(2, metric).run();
  return id;
}

// The writer's dictionary of a run: cached while the run streams, else loaded.
RunTree& SqliteStore::tree_of(int64_t run) {
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
  for (const TrimStep& step : trim_steps(opts_.resolutions, o.now_ns)) {
    const int64_t cutoff = step.cutoff;
    Txn txn(writer_);
    if (step.coarsest) {
      Stmt q(writer_,
             "SELECT b.run, b.metric, b.total, b.data FROM buckets b JOIN runs r ON r.id=b.run"
             " WHERE b.width=? AND b.bucket<? AND r.source<>'upload' ORDER BY b.run, b.metric");
      q.bind(1, step.width_ns).bind(2, cutoff);
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
      q.bind(1, step.width_ns).bind(2, cutoff);
      while (q.step()) runs.push_back(q.i64(0));
    }
    Stmt d(writer_, "DELETE FROM buckets WHERE width=? AND bucket<? AND run=?");
    Stmt rev(writer_, "UPDATE runs SET revision=revision+1 WHERE id=?");
    for (int64_t run : runs) {
      d.bind(1, step.width_ns).bind(2, cutoff).bind(3, run).run();
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

int64_t SqliteStore::give_back_space() {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  return give_back_locked();
}

// The steps of retain_runs (store.hpp) on the writer, under write_mu_.
struct SqliteStore::Retain final : RetainSteps {
  explicit Retain(SqliteStore& st) : st(st) {}
  std::vector<int64_t> ids(const char* sql, int64_t arg) {
    Stmt q(st.writer_, sql);
    q.bind(1, arg);
    std::vector<int64_t> out;
    while (q.step()) out.push_back(q.i64(0));
    return out;
  }
  std::vector<int64_t> finished_before(int64_t ns) override {
    return ids("SELECT id FROM runs WHERE status='finished' AND ended_ns<?", ns);
  }
  std::vector<int64_t> finished_beyond(int64_t keep) override {
    return ids(
        "SELECT id FROM runs WHERE status='finished' AND id < "
        "(SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT ?))",
        keep);
  }
  std::optional<int64_t> oldest_finished() override {
    Stmt q(st.writer_, "SELECT id FROM runs WHERE status='finished' ORDER BY id LIMIT 1");
    if (!q.step()) return std::nullopt;
    return q.i64(0);
  }
  bool delete_run(int64_t id) override {
    Txn txn(st.writer_);
    const bool found = st.delete_locked(id);
    txn.commit();
    return found;
  }
  int64_t trim(const RetainOptions& o, std::vector<int64_t>& touched) override {
    return st.trim(o, touched);
  }
  uint64_t stored_bytes() override { return static_cast<uint64_t>(used_bytes(st.writer_)); }
  SqliteStore& st;
};

RetainResult SqliteStore::retain(const RetainOptions& o) {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  Retain steps(*this);
  RetainResult out = retain_runs(steps, o);
  out.bytes_freed = give_back_locked();
  return out;
}

std::vector<int64_t> SqliteStore::finish_idle(int64_t before_ns) {
  std::lock_guard<std::mutex> lock(write_mu_);
  check_open();
  Txn txn(writer_);
  std::vector<int64_t> out;
  {
    Stmt q(writer_,
           "UPDATE runs SET status='finished', revision=revision+1"
           " WHERE status='live' AND touched_ns<? RETURNING id");
    q.bind(1, before_ns);
    while (q.step()) out.push_back(q.i64(0));
  }
  txn.commit();
  for (int64_t id : out) trees_.erase(id);
  return out;
}

std::unique_ptr<Store> open_sqlite_store(const std::string& dir, const StoreOptions& opts) {
  return std::make_unique<SqliteStore>(dir, opts);
}

}  // namespace lfs

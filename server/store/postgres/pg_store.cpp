// PgStore: the Store on PostgreSQL, shared by several luaflame-server processes.
//
// The model is SqliteStore's (store.hpp, batch.hpp): a run's dictionary of frames and nodes in
// appended blobs, values as blobs per (run, metric, resolution, bucket), a few parts each
// (batch.hpp, parts_to_merge), the merged tree under width 0. Nothing that matters lives in a
// server: every write is one transaction, acknowledged after COMMIT, so any server reads it at
// once. Writes to one run are serialised across servers by its row lock (SELECT ... FOR UPDATE):
// under it, a chunk adds a part to each of its buckets, merging the newest small parts. Each server
// keeps the dictionaries of the live runs it writes to, tagged with the run's revision; under the
// row lock a copy whose revision is not the run's (another server wrote, or retention trimmed) is
// reloaded, so it is never stale. Every change bumps runs.revision, which every server's caches put
// in their keys. Retention runs only in the server holding a session advisory lock, released when
// that server dies.
#include "store/postgres/pg_store.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "store/batch.hpp"
#include "store/postgres/pg_batch.hpp"
#include "store/postgres/pg_client.hpp"
#include "store/postgres/pg_list.hpp"
#include "store/postgres/pg_schema.hpp"

namespace lfs {
namespace {

// Advisory lock keys (pg_advisory_lock's bigint space, per database).
constexpr int64_t kRetentionLock = 0x6c7566'0002;  // held by the server that runs retention
constexpr int64_t kWhole = kPgWhole;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kRowBytes = kPgRowBytes;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string_view> views(const std::vector<std::string>& v) {
  return pg_views(v);
}

// Reads a run's dictionary on `c`.
void load_dict(pg::Conn& c, int64_t run, std::vector<std::string>& frames,
               std::vector<Batch::Node>& nodes) {
  auto q =
      c.query("load_dict", "SELECT kind::int8, data FROM dict WHERE run=$1 ORDER BY kind, first",
              pg::Params().add(run), /*binary=*/true);
  for (int i = 0; i < q.rows(); ++i) {
    if (q.bin_i64(i, 0) == 0)
      decode_frames(q.bytes(i, 1), frames);
    else if (!decode_nodes(q.bytes(i, 1), nodes))
      throw std::runtime_error("store: run " + std::to_string(run) + ": bad node blob");
  }
  for (const Batch::Node& n : nodes)
    if (n.frame >= frames.size())
      throw std::runtime_error("store: run " + std::to_string(run) + ": node names no frame");
}

// A live run's dictionary as this server last wrote it, valid while the run has `revision`.
struct CachedTree {
  int64_t revision = -1;
  RunTree tree;
};

class PgStore : public Store {
 public:
  PgStore(const std::string& url, const StoreOptions& opts)
      // --sync normal: COMMIT returns before PostgreSQL's WAL is flushed; a crash of a
      // luaflame-server still loses nothing, a crash of PostgreSQL may lose the last commits.
      // Custom plans always: a generic plan made while a table was still small (a new database)
      // stays cached and scans what later grew to millions of rows; planning costs ~0.1 ms.
      : opts_(opts),
        pool_(url, 32,
              std::string("SET plan_cache_mode=force_custom_plan") +
                  (opts.sync_full ? "" : "; SET synchronous_commit=off")) {
    if (opts_.resolutions.empty()) throw std::runtime_error("store: no resolutions");
    pg::Pool::Lease c(pool_);
    pg_migrate(*c);
  }
  ~PgStore() override { shut(); }  // not the virtual close() (as SqliteStore)

  using Store::create_run;
  int64_t create_run(const NewRun& run, Batch&& data) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    int64_t id = insert_run(*c, run);
    RunTree tree;  // an upload's tree is not kept: the run never changes
    add_batch(*c, id, data, tree, /*all_resolutions=*/false, &data);
    txn.commit();
    return id;
  }

  int64_t open_stream(const NewRun& run, bool& created) override {
    pg::Pool::Lease c(pool_);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto r = c->query("stream_find", "SELECT id FROM runs WHERE stream=$1",
                        pg::Params().add(run.stream));
      if (r.rows()) {
        created = false;
        return r.i64(0, 0);
      }
      pg::Txn txn(*c);
      // ON CONFLICT: a create of the same stream on another server at the same moment
      // makes this one wait, then insert nothing; the loop then finds that run.
      int64_t id = insert_run(*c, run);
      txn.commit();
      if (id > 0) {
        created = true;
        return id;
      }
    }
    throw std::runtime_error("store: stream " + run.stream + " neither found nor created");
  }

  AppendStatus append(int64_t run, int64_t seq, const Batch& data) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    auto r = c->query("append_lock", "SELECT status, revision FROM runs WHERE id=$1 FOR UPDATE",
                      pg::Params().add(run));
    if (!r.rows()) return AppendStatus::not_found;
    if (r.text(0, 0) != "live") return AppendStatus::finished;
    const int64_t revision = r.i64(0, 1);
    if (seq >= 0) {
      auto ins = c->query("chunk_seen",
                          "INSERT INTO chunks(run, seq) VALUES($1, $2) ON CONFLICT DO NOTHING",
                          pg::Params().add(run).add(seq));
      if (ins.affected() == 0) return AppendStatus::duplicate;
    }
    std::shared_ptr<CachedTree> cached = tree_of(*c, run, revision);
    try {
      add_batch(*c, run, data, cached->tree, true);
      txn.commit();
    } catch (...) {
      forget_tree(run);  // half-mapped: reloaded next time
      throw;
    }
    cached->revision = revision + 1;  // what add_batch made it
    return AppendStatus::ok;
  }

  bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) override {
    pg::Pool::Lease c(pool_);
    pg::Params p;
    if (stats_json.empty())
      p.null();
    else
      p.add(stats_json);
    p.add(ended_ns).add(run);
    auto r = c->query("finish",
                      "UPDATE runs SET status='finished', stats=COALESCE($1, stats),"
                      " ended_ns=GREATEST(ended_ns, $2), revision=revision+1 WHERE id=$3",
                      p);
    forget_tree(run);
    return r.affected() > 0;
  }

  std::vector<int64_t> finish_idle(int64_t before_ns) override {
    pg::Pool::Lease c(pool_);
    auto r = c->query("finish_idle",
                      "UPDATE runs SET status='finished', revision=revision+1"
                      " WHERE status='live' AND touched_ns<$1 RETURNING id",
                      pg::Params().add(before_ns));
    std::vector<int64_t> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.i64(i, 0));
    for (int64_t id : out) forget_tree(id);
    return out;
  }

  std::optional<RunInfo> get_run(int64_t id) override {
    pg::Pool::Lease c(pool_);
    auto r = c->query("get_run", (std::string(kPgRunColumns) + " WHERE id=$1").c_str(),
                      pg::Params().add(id));
    if (!r.rows()) return std::nullopt;
    std::vector<RunInfo> runs{pg_read_run(r, 0)};
    pg_fill_runs(*c, runs);
    return runs[0];
  }

  RunList list_runs(const RunFilter& f) override {
    pg::Pool::Lease c(pool_);
    return pg_list_runs(*c, f);
  }

  std::optional<int64_t> latest_run(const std::string& name, const Tags& tags,
                                    int64_t exclude) override {
    pg::Pool::Lease c(pool_);
    std::string sql = "SELECT id FROM runs WHERE name=$1 AND status='finished' AND id<>$2";
    pg::Params p;
    p.add(name).add(exclude);
    int n = 2;
    for (const auto& [k, v] : tags) {
      sql += " AND EXISTS (SELECT 1 FROM tags WHERE run=runs.id AND key=$" + std::to_string(++n);
      sql += " AND value=$" + std::to_string(++n) + ")";
      p.add(k).add(v);
    }
    auto r = c->query_once(sql + " ORDER BY id DESC LIMIT 1", p);
    if (r.rows()) return r.i64(0, 0);
    return std::nullopt;
  }

  void read_tree(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                 StoredTree& out) override {
    pg::Pool::Lease c(pool_);
    pg::Txn snapshot(
        *c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // dictionary and values agree
    out = StoredTree{};
    load_dict(*c, run, out.frames, out.nodes);
    std::vector<int64_t> width, lo, hi;
    if (from_ns == kMin && until_ns == kMax) {
      width = {kWhole};
      lo = {kMin};
      hi = {kMax};
    } else {
      for (const Piece& piece : cover(from_ns, until_ns, opts_.resolutions,
                                      pg_horizons(*c, run, metric, opts_.resolutions))) {
        width.push_back(opts_.resolutions[static_cast<std::size_t>(piece.level)].width_ns);
        lo.push_back(piece.lo);
        hi.push_back(piece.hi);
      }
    }
    // One index range scan per piece (a join of the pieces with the table would let stale
    // statistics pick a scan of all the run's buckets).
    std::vector<pg::Result> parts;
    for (std::size_t k = 0; k < width.size(); ++k)
      parts.push_back(
          c->query("read_piece",
                   "SELECT data FROM buckets WHERE run=$1 AND metric=$2 AND width=$3 AND bucket>=$4"
                   " AND bucket<$5",
                   pg::Params().add(run).add(metric).add(width[k]).add(lo[k]).add(hi[k]),
                   /*binary=*/true));
    snapshot.commit();
    std::vector<int64_t> dense(out.nodes.size(), 0);
    for (const pg::Result& q : parts)
      for (int i = 0; i < q.rows(); ++i)
        if (!add_blob(q.bytes(i, 0), dense))
          throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
    for (std::size_t i = 0; i < dense.size(); ++i)
      if (dense[i] != 0) out.values.emplace_back(static_cast<uint32_t>(i), dense[i]);
  }

  std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                                  int64_t step_ns) override {
    pg::Pool::Lease c(pool_);
    pg::Txn snapshot(*c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    std::vector<TimePoint> out;
    for (const Piece& p : timeline_pieces(from_ns, until_ns, step_ns, opts_.resolutions,
                                          pg_horizons(*c, run, metric, opts_.resolutions))) {
      const int64_t w = opts_.resolutions[static_cast<std::size_t>(p.level)].width_ns;
      auto q = c->query(
          "timeline",
          "SELECT bucket, SUM(total)::int8 FROM buckets WHERE run=$1 AND metric=$2 AND width=$3"
          " AND bucket>=$4 AND bucket<$5 GROUP BY bucket ORDER BY bucket DESC",  // its parts
          pg::Params().add(run).add(metric).add(w).add(p.lo).add(p.hi), /*binary=*/true);
      for (int i = 0; i < q.rows(); ++i) out.push_back({q.bin_i64(i, 0), w, q.bin_i64(i, 1)});
    }
    std::reverse(out.begin(), out.end());
    snapshot.commit();
    return out;
  }

  bool delete_run(int64_t id) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    bool found = delete_in(*c, id);
    txn.commit();
    forget_tree(id);
    return found;
  }

  bool leads_retention() override {
    std::lock_guard<std::mutex> lock(leader_mu_);
    if (leader_ && leader_->ok()) return true;
    // A session lock: held as long as this connection lives, so a server that dies gives
    // retention to the next server that asks.
    leader_.reset();
    try {
      auto c = pool_.connect();
      auto r =
          c->query("try_lead", "SELECT pg_try_advisory_lock($1)", pg::Params().add(kRetentionLock));
      if (r.text(0, 0) == "t") leader_ = std::move(c);
    } catch (const std::exception&) {
      return false;
    }
    return leader_ != nullptr;
  }

  RetainResult retain(const RetainOptions& o) override;

  StoreStats stats() override {
    pg::Pool::Lease c(pool_);
    StoreStats s;
    auto r =
        c->query("stats",
                 "SELECT COUNT(*), COUNT(*) FILTER (WHERE status='live'), COALESCE(SUM(bytes), 0),"
                 " pg_database_size(current_database()) FROM runs");
    s.runs = r.i64(0, 0);
    s.live_runs = r.i64(0, 1);
    s.stored_bytes = r.i64(0, 2);
    s.file_bytes = r.i64(0, 3);
    return s;
  }

  void close() override { shut(); }

 private:
  void shut() {
    pool_.close();
    std::lock_guard<std::mutex> lock(leader_mu_);
    leader_.reset();
    std::lock_guard<std::mutex> lock2(trees_mu_);
    trees_.clear();
  }

  // Inserts the run row, its tags and metrics. 0 when its stream key exists already.
  int64_t insert_run(pg::Conn& c, const NewRun& run) {
    pg::Params p;
    p.add(run.name).add(run.source).add(std::string_view(run.finished ? "finished" : "live"));
    if (run.stream.empty())
      p.null();
    else
      p.add(run.stream);
    p.add(run.started_ns).add(std::max(run.ended_ns, run.started_ns)).add(now_ns()).add(run.hz);
    auto r = c.query(
        "insert_run",
        "INSERT INTO runs(name, source, status, stream, started_ns, ended_ns, created_ns, hz,"
        " touched_ns) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $7)"
        " ON CONFLICT(stream) DO NOTHING RETURNING id",
        p);
    if (!r.rows()) return 0;
    const int64_t id = r.i64(0, 0);
    std::vector<std::string> keys, values;
    for (const auto& [k, v] : run.tags) {
      keys.push_back(k);
      values.push_back(v);
    }
    c.query(
        "insert_tags",
        "INSERT INTO tags(run, key, value, name) SELECT $1, k, v, $4 FROM unnest($2::text[], "
        "$3::text[]) AS t(k, v)",
        pg::Params().add(id).array(views(keys), false).array(views(values), false).add(run.name));
    std::vector<int32_t> metrics(run.metrics.begin(), run.metrics.end());
    c.query("insert_metrics",
            "INSERT INTO metrics(run, metric) SELECT DISTINCT $1, m FROM unnest($2::int4[]) m ON "
            "CONFLICT DO NOTHING",
            pg::Params().add(id).array(metrics));
    return id;
  }

  // The dictionary of a live run for a write, under its row lock: this server's copy when
  // the run is still at the revision it left it, else loaded from the database.
  std::shared_ptr<CachedTree> tree_of(pg::Conn& c, int64_t run, int64_t revision) {
    {
      std::lock_guard<std::mutex> lock(trees_mu_);
      auto it = trees_.find(run);
      if (it != trees_.end() && it->second->revision == revision) return it->second;
    }
    auto cached = std::make_shared<CachedTree>();
    RunTree& tree = cached->tree;
    std::vector<std::string> frames;
    std::vector<Batch::Node> nodes;
    load_dict(c, run, frames, nodes);
    for (std::string& f : frames) tree.add_frame(std::move(f));
    for (const Batch::Node& n : nodes) tree.add_node(n.parent, n.frame);
    // Stacks: nodes with a value in the run's merged tree.
    auto q = c.query("tree_valued", "SELECT data FROM buckets WHERE run=$1 AND width=0",
                     pg::Params().add(run),
                     /*binary=*/true);
    std::vector<int64_t> any(tree.nodes.size(), 0);
    for (int i = 0; i < q.rows(); ++i) add_blob(q.bytes(i, 0), any);
    for (std::size_t i = 0; i < any.size(); ++i) tree.valued[i] = any[i] != 0;
    auto s =
        c.query("tree_stacks", "SELECT stack_count FROM runs WHERE id=$1", pg::Params().add(run));
    tree.stack_count = s.rows() ? s.i64(0, 0) : 0;
    cached->revision = revision;
    std::lock_guard<std::mutex> lock(trees_mu_);
    std::size_t nodes_cached = 0;
    for (const auto& [id, t] : trees_) nodes_cached += t->tree.nodes.size();
    if (nodes_cached > (8u << 20)) trees_.clear();  // bounded: the others reload when needed
    trees_[run] = cached;
    return cached;
  }

  void forget_tree(int64_t run) {
    std::lock_guard<std::mutex> lock(trees_mu_);
    trees_.erase(run);
  }

  void add_batch(pg::Conn& c, int64_t run, const Batch& b, RunTree& tree, bool all_resolutions,
                 Batch* owner = nullptr);
  int64_t trim(pg::Conn& c, const RetainOptions& o, std::vector<int64_t>& runs);
  struct Retain;

  bool delete_in(pg::Conn& c, int64_t id) {
    static const char* const tables[][2] = {{"del_buckets", "DELETE FROM buckets WHERE run=$1"},
                                            {"del_dict", "DELETE FROM dict WHERE run=$1"},
                                            {"del_tags", "DELETE FROM tags WHERE run=$1"},
                                            {"del_metrics", "DELETE FROM metrics WHERE run=$1"},
                                            {"del_chunks", "DELETE FROM chunks WHERE run=$1"}};
    for (const auto& t : tables) c.query(t[0], t[1], pg::Params().add(id));
    return c.query("del_run", "DELETE FROM runs WHERE id=$1", pg::Params().add(id)).affected() > 0;
  }

  StoreOptions opts_;
  pg::Pool pool_;
  std::mutex trees_mu_;
  std::unordered_map<int64_t, std::shared_ptr<CachedTree>> trees_;
  std::mutex leader_mu_;
  std::unique_ptr<pg::Conn> leader_;
};

// Adds `b` to `run` inside the open transaction (under the run's row lock for a live run):
// the dictionary blobs the run lacked, then per metric its values merged into one bucket per
// resolution (the finest only unless all_resolutions) and into the merged tree, the buckets
// read in one query and rewritten in another.
// Every sum is checked before anything is written.
void PgStore::add_batch(pg::Conn& c, int64_t run, const Batch& b, RunTree& tree,
                        bool all_resolutions, Batch* owner) {
  check_batch(b);
  const std::size_t f0 = tree.frames.size(), n0 = tree.nodes.size();
  std::vector<uint32_t> node_of;
  tree.map(b, opts_.max_stacks, node_of, owner);
  int64_t bytes = pg_write_dict(c, run, tree, f0, n0);
  // An upload is one window that never grows: its finest bucket serves every range (cover()
  // skips resolutions a run has no buckets in).
  PgTargets t;
  for (const Resolution& res : opts_.resolutions) {
    t.widths.push_back(res.width_ns);
    t.starts.push_back(bucket_of(b.from_ns, res.width_ns));
    if (!all_resolutions) break;
  }
  t.widths.push_back(kWhole);
  t.starts.push_back(0);
  Values vals;
  for (std::size_t col = 0; col < b.metrics.size(); ++col) {
    const int64_t sum = column_values(b, col, node_of, vals);
    if (vals.empty()) continue;
    pg_add_total(c, run, b.metrics[col], sum);
    bytes += pg_merge_metric(c, run, b.metrics[col], t, vals, sum);
  }
  c.query("add_run",
          "UPDATE runs SET stack_count=$2, revision=revision+1, ended_ns=GREATEST(ended_ns, $3),"
          " started_ns=CASE WHEN $4>0 AND $4<started_ns THEN $4 ELSE started_ns END, "
          "bytes=bytes+$5, touched_ns=$6 WHERE id=$1",
          pg::Params()
              .add(run)
              .add(tree.stack_count)
              .add(b.until_ns)
              .add(b.from_ns)
              .add(bytes)
              .add(now_ns()));
}

// Per-resolution retention of streamed and ingested runs (uploads follow the whole-run rules),
// as SqliteStore::trim: dropping the coarsest resolution's buckets also takes their values out
// of the merged tree and the totals. Each resolution in one transaction; the runs touched
// are locked first (in id order), so a concurrent append on another server waits.
int64_t PgStore::trim(pg::Conn& c, const RetainOptions& o, std::vector<int64_t>& touched) {
  int64_t trimmed = 0;
  for (const TrimStep& step : trim_steps(opts_.resolutions, o.now_ns)) {
    const int64_t cutoff = step.cutoff;
    pg::Txn txn(c);
    auto runs = c.query(
        "trim_runs",
        "SELECT id FROM runs WHERE source<>'upload' AND id IN"
        " (SELECT DISTINCT run FROM buckets WHERE width=$1 AND bucket<$2) ORDER BY id FOR UPDATE",
        pg::Params().add(step.width_ns).add(cutoff));
    if (!runs.rows()) continue;
    std::vector<int64_t> ids;
    for (int i = 0; i < runs.rows(); ++i) ids.push_back(runs.i64(i, 0));
    if (step.coarsest) {
      auto q =
          c.query("trim_old",
                  "SELECT run, metric::int8, total, data FROM buckets WHERE width=$1 AND bucket<$2"
                  " AND run=ANY($3::int8[]) ORDER BY run, metric",
                  pg::Params().add(step.width_ns).add(cutoff).array(ids), /*binary=*/true);
      std::vector<Removed> subs;
      for (int i = 0; i < q.rows(); ++i)
        add_removed(subs, q.bin_i64(i, 0), static_cast<int>(q.bin_i64(i, 1)), q.bin_i64(i, 2),
                    q.bytes(i, 3));
      for (const Removed& s : subs) {
        // The merged tree's parts become one, less what the dropped buckets held.
        auto w = c.query("trim_whole",
                         "DELETE FROM buckets WHERE run=$1 AND metric=$2 AND width=0"
                         " RETURNING total, data",
                         pg::Params().add(s.run).add(s.metric), /*binary=*/true);
        Values cur;
        int64_t total = 0;
        for (int i = 0; i < w.rows(); ++i) {
          if (!merge_blob(w.bytes(i, 1), cur))
            throw std::runtime_error("store: run " + std::to_string(s.run) + ": bad bucket");
          total = checked_add(total, w.bin_i64(i, 0), "a bucket's total");
        }
        merge_values(cur, s.v, -1);
        if (!cur.empty()) {
          std::string blob;
          encode_values(cur, blob);
          c.query("trim_whole_set",
                  "INSERT INTO buckets(run, metric, width, bucket, total, data)"
                  " VALUES($1, $2, 0, 0, $3, $4)",
                  pg::Params().add(s.run).add(s.metric).add(total - s.sum).bytea(blob));
        }
        c.query("trim_total", "UPDATE metrics SET total=total-$3 WHERE run=$1 AND metric=$2",
                pg::Params().add(s.run).add(s.metric).add(s.sum));
      }
    }
    auto d = c.query(
        "trim_delete",
        "WITH gone AS (DELETE FROM buckets WHERE width=$1 AND bucket<$2 AND run=ANY($3::int8[])"
        " RETURNING run, length(data) AS n)"
        " UPDATE runs r SET revision=revision+1, bytes=bytes-g.b FROM"
        " (SELECT run, SUM(n + $4)::int8 AS b, COUNT(*) AS k FROM gone GROUP BY run) g"
        " WHERE r.id=g.run RETURNING r.id, g.k",
        pg::Params().add(step.width_ns).add(cutoff).array(ids).add(kRowBytes));
    txn.commit();
    for (int i = 0; i < d.rows(); ++i) {
      touched.push_back(d.i64(i, 0));
      trimmed += d.i64(i, 1);
    }
    for (int64_t id : ids) forget_tree(id);
  }
  return trimmed;
}

// The steps of retain_runs (store.hpp) on one connection of the server that leads retention.
struct PgStore::Retain final : RetainSteps {
  Retain(PgStore& st, pg::Conn& c) : st(st), c(c) {}
  std::vector<int64_t> ids(pg::Result r) {
    std::vector<int64_t> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.i64(i, 0));
    return out;
  }
  std::vector<int64_t> finished_before(int64_t ns) override {
    return ids(c.query("retain_old", "SELECT id FROM runs WHERE status='finished' AND ended_ns<$1",
                       pg::Params().add(ns)));
  }
  std::vector<int64_t> finished_beyond(int64_t keep) override {
    return ids(c.query("retain_keep",
                       "SELECT id FROM runs WHERE status='finished' AND id <"
                       " (SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT $1) k)",
                       pg::Params().add(keep)));
  }
  std::optional<int64_t> oldest_finished() override {
    auto r = c.query("retain_oldest",
                     "SELECT id FROM runs WHERE status='finished' ORDER BY id"
                     " LIMIT 1");
    if (r.rows() == 0) return std::nullopt;
    return r.i64(0, 0);
  }
  bool delete_run(int64_t id) override {
    pg::Txn txn(c);
    const bool found = st.delete_in(c, id);
    txn.commit();
    st.forget_tree(id);
    return found;
  }
  int64_t trim(const RetainOptions& o, std::vector<int64_t>& touched) override {
    return st.trim(c, o, touched);
  }
  uint64_t stored_bytes() override {
    return static_cast<uint64_t>(
        c.query("retain_stored", "SELECT COALESCE(SUM(bytes), 0) FROM runs").i64(0, 0));
  }
  PgStore& st;
  pg::Conn& c;
};

RetainResult PgStore::retain(const RetainOptions& o) {
  if (!leads_retention()) return {};
  pg::Pool::Lease c(pool_);
  Retain steps(*this, *c);
  const uint64_t before = steps.stored_bytes();
  RetainResult out = retain_runs(steps, o);
  // VACUUM now rather than at autovacuum's next visit: the dead rows' space becomes reusable
  // by new rows (PostgreSQL gives pages back to the file system only from a table's end), so
  // bytes_freed is what the store no longer holds, not a smaller file.
  if (out.buckets_trimmed > 0 || !out.deleted.empty()) {
    c->exec("VACUUM buckets, dict");
    const uint64_t after = steps.stored_bytes();
    out.bytes_freed = before > after ? static_cast<int64_t>(before - after) : 0;
  }
  return out;
}

}  // namespace

std::unique_ptr<Store> open_pg_store(const std::string& url, const StoreOptions& opts) {
  return std::make_unique<PgStore>(url, opts);
}

}  // namespace lfs

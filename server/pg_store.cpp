// PgStore: the Store on PostgreSQL, shared by several luaflame-server processes.
//
// Nothing that matters lives in a server: every write is one transaction and
// is acknowledged after COMMIT, so any server reads it at once. Writes to one
// run are serialised across servers by its row lock (SELECT ... FOR UPDATE),
// under which frame and stack ids are given out as the run's next ordinals.
// Each server keeps, per live run, the frames and stacks it has seen (so an
// append does not re-read the run's dictionary); under the row lock it first
// reads what other servers added since (ids >= the count it knows), so the
// copy is never stale. Each change bumps runs.version, which the caches of
// every server put in their keys: a change made through one server is never
// served stale by another. Retention runs only in the server that holds a
// session advisory lock (released when that server dies; another takes over).
#include "pg_store.hpp"

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "luaflame/folded.hpp"
#include "pg_client.hpp"

namespace lfs {
namespace {

// Advisory lock keys (pg_advisory_lock's bigint space is per database).
constexpr int64_t kSchemaLock = 0x6c7566'0001;     // creating or migrating the schema
constexpr int64_t kRetentionLock = 0x6c7566'0002;  // held by the server that runs retention

// Schema version 1. Frame and stack ids are ordinals within their run.
const char* const kSchemaV1 = R"(
  CREATE TABLE runs(
    id bigserial PRIMARY KEY, name text NOT NULL, source text NOT NULL, status text NOT NULL,
    stream text UNIQUE, started_ns bigint NOT NULL, ended_ns bigint NOT NULL,
    created_ns bigint NOT NULL, hz double precision NOT NULL DEFAULT 0, stats text,
    stack_count bigint NOT NULL DEFAULT 0, frame_count bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 0);
  CREATE INDEX runs_name ON runs(name, id);
  CREATE INDEX runs_status ON runs(status, id);
  CREATE TABLE tags(run bigint NOT NULL, key text NOT NULL, value text NOT NULL,
    PRIMARY KEY(run, key));
  CREATE INDEX tags_kv ON tags(key, value, run);
  CREATE TABLE metrics(run bigint NOT NULL, metric integer NOT NULL,
    total double precision NOT NULL DEFAULT 0, PRIMARY KEY(run, metric));
  CREATE TABLE frames(run bigint NOT NULL, id integer NOT NULL, name text NOT NULL,
    PRIMARY KEY(run, id));
  CREATE TABLE stacks(run bigint NOT NULL, id integer NOT NULL, path bytea NOT NULL,
    PRIMARY KEY(run, id));
  CREATE TABLE samples(run bigint NOT NULL, metric smallint NOT NULL, bucket bigint NOT NULL,
    stack integer NOT NULL, value double precision NOT NULL,
    PRIMARY KEY(run, metric, bucket, stack));
  CREATE TABLE chunks(run bigint NOT NULL, seq bigint NOT NULL, PRIMARY KEY(run, seq));)";

const char* const kRunColumns =
    "SELECT id, name, source, status, started_ns, ended_ns, hz, stats, stack_count, version FROM runs";

// Rough bytes a stored row takes (tuple header, item pointer, index entry), for
// the disk budget: PostgreSQL gives deleted space back only after VACUUM, so
// the database size cannot tell what a deletion freed.
constexpr int64_t kRowBytes = 48;

void put_varint(std::string& out, uint32_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A run's frames and stacks as this server knows them: the first `frames.size()`
// frame ids and `stack_count` stack ids.
struct RunDict {
  std::deque<std::string> names;
  std::unordered_map<std::string_view, int32_t> frames;
  std::unordered_map<std::string, int32_t> stacks;  // path blob -> id
  int64_t stack_count = 0;
  int32_t frame(std::string_view name) const {
    auto it = frames.find(name);
    return it == frames.end() ? -1 : it->second;
  }
  void add_frame(std::string_view name, int32_t id) {
    names.emplace_back(name);
    frames.emplace(names.back(), id);
  }
};

// The rows one batch adds to a run.
struct Rows {
  std::vector<int32_t> frame_ids;
  std::vector<std::string> frame_names;
  std::vector<int32_t> stack_ids;
  std::vector<std::string> stack_paths;
  std::vector<int32_t> metric, stack;  // samples, merged per (metric, stack)
  std::vector<double> value;
  std::vector<int32_t> total_metric;
  std::vector<double> total;
  int64_t bytes = 0;
};

std::vector<std::string_view> views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

class PgStore : public Store {
 public:
  PgStore(const std::string& url, const StoreOptions& opts)
      // --sync normal: COMMIT returns before PostgreSQL's WAL is flushed; a crash of a
      // luaflame-server still loses nothing, a crash of PostgreSQL may lose the last commits.
      : opts_(opts), pool_(url, 32, opts.sync_full ? "" : "SET synchronous_commit=off") {
    pg::Pool::Lease c(pool_);
    migrate(*c);
  }
  ~PgStore() override { close(); }

  int64_t create_run(const NewRun& run, const Batch& data) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    int64_t id = insert_run(*c, run);
    RunDict dict;
    write_batch(*c, id, data, dict);
    txn.commit();
    return id;
  }

  int64_t open_stream(const NewRun& run, bool& created) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    // The unique stream key makes a concurrent create on another server wait, then see this one.
    auto r = c->query("stream_find", "SELECT id FROM runs WHERE stream=$1", pg::Params().add(run.stream));
    if (r.rows()) {
      created = false;
      return r.i64(0, 0);
    }
    int64_t id = insert_run(*c, run);
    txn.commit();
    created = id > 0;
    if (!created) return open_stream(run, created);  // lost the race: the other server's run
    return id;
  }

  AppendStatus append(int64_t run, int64_t seq, const Batch& data) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    auto r = c->query("append_lock",
                      "SELECT status, stack_count, frame_count FROM runs WHERE id=$1 FOR UPDATE",
                      pg::Params().add(run));
    if (!r.rows()) return AppendStatus::not_found;
    if (r.text(0, 0) != "live") return AppendStatus::finished;
    if (seq >= 0) {
      auto ins = c->query("chunk_seen", "INSERT INTO chunks(run, seq) VALUES($1, $2) ON CONFLICT DO NOTHING",
                          pg::Params().add(run).add(seq));
      if (ins.affected() == 0) return AppendStatus::duplicate;
    }
    std::shared_ptr<RunDict> dict = dict_for(*c, run, r.i64(0, 2), r.i64(0, 1));
    try {
      write_batch(*c, run, data, *dict);
      txn.commit();
    } catch (...) {
      forget_dict(run);  // it may hold ids of the rolled-back rows
      throw;
    }
    return AppendStatus::ok;
  }

  bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) override {
    pg::Pool::Lease c(pool_);
    pg::Params p;
    if (stats_json.empty()) p.null(); else p.add(stats_json);
    p.add(ended_ns).add(run);
    auto r = c->query("finish",
                      "UPDATE runs SET status='finished', stats=COALESCE($1, stats),"
                      " ended_ns=GREATEST(ended_ns, $2), version=version+1 WHERE id=$3",
                      p);
    forget_dict(run);
    return r.affected() > 0;
  }

  std::optional<RunInfo> get_run(int64_t id) override {
    pg::Pool::Lease c(pool_);
    auto r = c->query("get_run", (std::string(kRunColumns) + " WHERE id=$1").c_str(), pg::Params().add(id));
    if (!r.rows()) return std::nullopt;
    std::vector<RunInfo> runs{read_run(r, 0)};
    fill_runs(*c, runs);
    return runs[0];
  }

  RunList list_runs(const RunFilter& f) override {
    pg::Pool::Lease c(pool_);
    std::string where = " WHERE true";
    pg::Params p;
    int n = 0;
    auto arg = [&n] { return "$" + std::to_string(++n); };
    if (!f.name.empty()) { where += " AND name=" + arg(); p.add(f.name); }
    if (!f.status.empty()) { where += " AND status=" + arg(); p.add(f.status); }
    for (const auto& [k, v] : f.tags) {
      where += " AND id IN (SELECT run FROM tags WHERE key=" + arg();
      where += " AND value=" + arg() + ")";
      p.add(k).add(v);
    }
    RunList out;
    pg::Txn txn(*c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // count and page agree
    out.total = c->query_once("SELECT COUNT(*) FROM runs" + where, p).i64(0, 0);
    std::string sql = std::string(kRunColumns) + where + " ORDER BY id DESC LIMIT " + arg();
    sql += " OFFSET " + arg();
    p.add(f.limit).add(f.offset);
    auto r = c->query_once(sql, p);
    for (int i = 0; i < r.rows(); ++i) out.runs.push_back(read_run(r, i));
    fill_runs(*c, out.runs);
    txn.commit();
    return out;
  }

  std::optional<int64_t> latest_run(const std::string& name, const Tags& tags, int64_t exclude) override {
    pg::Pool::Lease c(pool_);
    std::string sql = "SELECT id FROM runs WHERE name=$1 AND status='finished' AND id<>$2";
    pg::Params p;
    p.add(name).add(exclude);
    int n = 2;
    for (const auto& [k, v] : tags) {
      sql += " AND id IN (SELECT run FROM tags WHERE key=$" + std::to_string(++n);
      sql += " AND value=$" + std::to_string(++n) + ")";
      p.add(k).add(v);
    }
    auto r = c->query_once(sql + " ORDER BY id DESC LIMIT 1", p);
    if (r.rows()) return r.i64(0, 0);
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
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // one snapshot for both
    std::vector<std::string> names;
    {
      auto f = c->query("read_frames", "SELECT id, name FROM frames WHERE run=$1 ORDER BY id",
                        pg::Params().add(run));
      names.resize(static_cast<std::size_t>(f.rows()));
      for (int i = 0; i < f.rows(); ++i) {
        auto id = static_cast<std::size_t>(f.i64(i, 0));
        if (id >= names.size()) names.resize(id + 1);
        names[id] = f.text(i, 1);
      }
    }
    frames(names);
    auto q = c->query("read_paths",
                      "SELECT s.path, v.total FROM (SELECT stack, SUM(value) AS total FROM samples"
                      " WHERE run=$1 AND metric=$2 AND bucket>=$3 AND bucket<$4 GROUP BY stack) v"
                      " JOIN stacks s ON s.run=$1 AND s.id=v.stack ORDER BY v.stack",
                      pg::Params().add(run).add(metric).add(from_ns).add(until_ns), /*binary=*/true);
    txn.commit();
    std::vector<uint32_t> ids;
    for (int i = 0; i < q.rows(); ++i) {
      if (!decode_path(q.bytes(i, 0), ids)) continue;
      bool ok = !ids.empty();
      for (uint32_t id : ids) ok = ok && id < names.size();
      if (ok) fn(ids.data(), ids.size(), q.bin_dbl(i, 1));
    }
  }

  std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns) override {
    pg::Pool::Lease c(pool_);
    auto q = c->query("timeline",
                      "SELECT bucket, SUM(value) FROM samples WHERE run=$1 AND metric=$2 AND bucket>=$3"
                      " AND bucket<$4 GROUP BY bucket ORDER BY bucket",
                      pg::Params().add(run).add(metric).add(from_ns).add(until_ns), /*binary=*/true);
    std::vector<TimePoint> out;
    for (int i = 0; i < q.rows(); ++i) out.push_back({q.bin_i64(i, 0), q.bin_dbl(i, 1)});
    return out;
  }

  bool delete_run(int64_t id) override {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    bool found = delete_in(*c, id);
    txn.commit();
    forget_dict(id);
    return found;
  }

  bool leads_retention() override {
    std::lock_guard<std::mutex> lock(leader_mu_);
    if (leader_ && leader_->ok()) return true;
    // A session lock: held as long as this connection lives, so a server that
    // dies gives retention to the next server that asks.
    leader_.reset();
    try {
      auto c = pool_.connect();
      auto r = c->query("try_lead", "SELECT pg_try_advisory_lock($1)", pg::Params().add(kRetentionLock));
      if (r.text(0, 0) == "t") leader_ = std::move(c);
    } catch (const std::exception&) {
      return false;
    }
    return leader_ != nullptr;
  }

  std::vector<int64_t> retain(int64_t older_than_ns, int64_t keep_runs, uint64_t budget) override {
    std::vector<int64_t> deleted;
    if (!leads_retention()) return deleted;
    pg::Pool::Lease c(pool_);
    std::vector<int64_t> doomed;
    if (older_than_ns > 0) {
      auto r = c->query("retain_old", "SELECT id FROM runs WHERE status='finished' AND ended_ns<$1",
                        pg::Params().add(older_than_ns));
      for (int i = 0; i < r.rows(); ++i) doomed.push_back(r.i64(i, 0));
    }
    if (keep_runs > 0) {
      auto r = c->query("retain_keep",
                        "SELECT id FROM runs WHERE status='finished' AND id <"
                        " (SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT $1) k)",
                        pg::Params().add(keep_runs));
      for (int i = 0; i < r.rows(); ++i) doomed.push_back(r.i64(i, 0));
    }
    for (int64_t id : doomed) {
      pg::Txn txn(*c);
      if (delete_in(*c, id)) deleted.push_back(id);
      txn.commit();
    }
    while (budget > 0 && static_cast<uint64_t>(stored_bytes(*c)) > budget) {
      auto r = c->query("retain_oldest", "SELECT id FROM runs WHERE status='finished' ORDER BY id LIMIT 1");
      if (!r.rows()) break;
      pg::Txn txn(*c);
      if (delete_in(*c, r.i64(0, 0))) deleted.push_back(r.i64(0, 0));
      txn.commit();
    }
    return deleted;
  }

  StoreStats stats() override {
    pg::Pool::Lease c(pool_);
    StoreStats s;
    auto r = c->query("stats",
                      "SELECT COUNT(*), COUNT(*) FILTER (WHERE status='live'), COALESCE(SUM(bytes), 0),"
                      " pg_database_size(current_database()) FROM runs");
    s.runs = r.i64(0, 0);
    s.live_runs = r.i64(0, 1);
    s.stored_bytes = r.i64(0, 2);
    s.file_bytes = r.i64(0, 3);
    return s;
  }

  void close() override {
    pool_.close();
    std::lock_guard<std::mutex> lock(leader_mu_);
    leader_.reset();
  }

 private:
  void migrate(pg::Conn& c) {
    pg::Txn txn(c);
    // Two servers starting on an empty database: one creates, the other waits and sees it.
    c.query("schema_lock", "SELECT pg_advisory_xact_lock($1)", pg::Params().add(kSchemaLock));
    c.exec("CREATE TABLE IF NOT EXISTS luaflame_meta(key text PRIMARY KEY, value bigint NOT NULL)");
    auto r = c.query("schema_version", "SELECT value FROM luaflame_meta WHERE key='schema'");
    const int64_t version = r.rows() ? r.i64(0, 0) : 0, latest = 1;
    if (version > latest)
      throw std::runtime_error("store: the database has schema version " + std::to_string(version) +
                               ", newer than this server's " + std::to_string(latest));
    if (version < 1) c.exec(kSchemaV1);
    c.query("schema_set",
            "INSERT INTO luaflame_meta VALUES('schema', $1) ON CONFLICT(key) DO UPDATE SET value=$1",
            pg::Params().add(latest));
    txn.commit();
  }

  // Inserts the run row, its tags and metrics. 0 when its stream key exists already.
  int64_t insert_run(pg::Conn& c, const NewRun& run) {
    pg::Params p;
    p.add(run.name).add(run.source).add(std::string_view(run.finished ? "finished" : "live"));
    if (run.stream.empty()) p.null(); else p.add(run.stream);
    p.add(run.started_ns).add(std::max(run.ended_ns, run.started_ns)).add(now_ns()).add(run.hz);
    auto r = c.query("insert_run",
                     "INSERT INTO runs(name, source, status, stream, started_ns, ended_ns, created_ns, hz)"
                     " VALUES($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT(stream) DO NOTHING RETURNING id",
                     p);
    if (!r.rows()) return 0;
    const int64_t id = r.i64(0, 0);
    std::vector<std::string> keys, values;
    for (const auto& [k, v] : run.tags) { keys.push_back(k); values.push_back(v); }
    c.query("insert_tags", "INSERT INTO tags(run, key, value) SELECT $1, * FROM unnest($2::text[], $3::text[])",
            pg::Params().add(id).array(views(keys), false).array(views(values), false));
    std::vector<int32_t> metrics(run.metrics.begin(), run.metrics.end());
    c.query("insert_metrics",
            "INSERT INTO metrics(run, metric) SELECT DISTINCT $1, m FROM unnest($2::int4[]) m"
            " ON CONFLICT DO NOTHING",
            pg::Params().add(id).array(metrics));
    return id;
  }

  // The dictionary of a live run, brought up to date with what other servers added.
  // Called under the run's row lock.
  std::shared_ptr<RunDict> dict_for(pg::Conn& c, int64_t run, int64_t frame_count, int64_t stack_count) {
    std::shared_ptr<RunDict> d;
    {
      std::lock_guard<std::mutex> lock(dict_mu_);
      auto& slot = dicts_[run];
      if (!slot || static_cast<int64_t>(slot->names.size()) > frame_count || slot->stack_count > stack_count)
        slot = std::make_shared<RunDict>();
      d = slot;
      if (dicts_.size() > 256) {  // bounded: drop another run's copy (reloaded when needed)
        for (auto it = dicts_.begin(); it != dicts_.end(); ++it)
          if (it->first != run) { dicts_.erase(it); break; }
      }
    }
    if (static_cast<int64_t>(d->names.size()) < frame_count) {
      auto f = c.query("sync_frames", "SELECT id, name FROM frames WHERE run=$1 AND id>=$2 ORDER BY id",
                       pg::Params().add(run).add(static_cast<int64_t>(d->names.size())));
      for (int i = 0; i < f.rows(); ++i) d->add_frame(f.text(i, 1), static_cast<int32_t>(f.i64(i, 0)));
    }
    if (d->stack_count < stack_count) {
      auto s = c.query("sync_stacks", "SELECT id::int8, path FROM stacks WHERE run=$1 AND id>=$2 ORDER BY id",
                       pg::Params().add(run).add(d->stack_count), /*binary=*/true);
      for (int i = 0; i < s.rows(); ++i)
        d->stacks.emplace(std::string(s.bytes(i, 1)), static_cast<int32_t>(s.bin_i64(i, 0)));
      d->stack_count = stack_count;
    }
    return d;
  }

  void forget_dict(int64_t run) {
    std::lock_guard<std::mutex> lock(dict_mu_);
    dicts_.erase(run);
  }

  // Interns the batch's frames and stacks in `dict` (new ones into `rows`) and
  // merges its values per (metric, stack).
  Rows rows_of(const Batch& data, RunDict& dict) {
    Rows rows;
    std::unordered_map<uint64_t, std::size_t> cell;  // metric<<32 | stack -> index in rows
    std::vector<double> totals(data.metrics.size(), 0.0);
    std::string blob;
    for (const auto& [text, values] : data.stacks) {
      blob.clear();
      for (std::string_view f : lf::split_stack(text)) {
        int32_t id = dict.frame(f);
        if (id < 0) {
          id = static_cast<int32_t>(dict.names.size());
          dict.add_frame(f, id);
          rows.frame_ids.push_back(id);
          rows.frame_names.emplace_back(f);
          rows.bytes += kRowBytes + static_cast<int64_t>(f.size());
        }
        put_varint(blob, static_cast<uint32_t>(id));
      }
      auto [it, added] = dict.stacks.emplace(blob, static_cast<int32_t>(dict.stack_count));
      if (added) {
        if (static_cast<std::size_t>(++dict.stack_count) > opts_.max_stacks)
          throw LimitError("a run holds at most " + std::to_string(opts_.max_stacks) + " distinct stacks");
        rows.stack_ids.push_back(it->second);
        rows.stack_paths.push_back(blob);
        rows.bytes += kRowBytes + static_cast<int64_t>(blob.size());
      }
      for (std::size_t c = 0; c < data.metrics.size() && c < values.size(); ++c) {
        if (values[c] == 0) continue;
        const uint64_t key = (static_cast<uint64_t>(data.metrics[c]) << 32) | static_cast<uint32_t>(it->second);
        auto [slot, fresh] = cell.emplace(key, rows.value.size());
        if (fresh) {
          rows.metric.push_back(data.metrics[c]);
          rows.stack.push_back(it->second);
          rows.value.push_back(0);
        }
        rows.value[slot->second] += values[c];
        totals[c] += values[c];
      }
    }
    for (std::size_t c = 0; c < data.metrics.size(); ++c) {
      rows.total_metric.push_back(data.metrics[c]);
      rows.total.push_back(totals[c]);
    }
    rows.bytes += kRowBytes * static_cast<int64_t>(rows.value.size());
    return rows;
  }

  // Writes a batch into `run` inside the caller's transaction.
  void write_batch(pg::Conn& c, int64_t run, const Batch& data, RunDict& dict) {
    Rows rows = rows_of(data, dict);
    const int64_t bucket = data.from_ns - data.from_ns % opts_.bucket_ns;
    if (!rows.frame_ids.empty())
      c.query("add_frames", "INSERT INTO frames(run, id, name) SELECT $1, * FROM unnest($2::int4[], $3::text[])",
              pg::Params().add(run).array(rows.frame_ids).array(views(rows.frame_names), false));
    if (!rows.stack_ids.empty())
      c.query("add_stacks", "INSERT INTO stacks(run, id, path) SELECT $1, * FROM unnest($2::int4[], $3::bytea[])",
              pg::Params().add(run).array(rows.stack_ids).array(views(rows.stack_paths), true));
    if (!rows.value.empty())
      c.query("add_samples",
              "INSERT INTO samples(run, metric, bucket, stack, value)"
              " SELECT $1, m, $2, s, v FROM unnest($3::int4[], $4::int4[], $5::float8[]) AS t(m, s, v)"
              " ON CONFLICT(run, metric, bucket, stack) DO UPDATE SET value=samples.value+excluded.value",
              pg::Params().add(run).add(bucket).array(rows.metric).array(rows.stack).array(rows.value));
    c.query("add_totals",
            "INSERT INTO metrics(run, metric, total) SELECT $1, m, SUM(t) FROM"
            " unnest($2::int4[], $3::float8[]) AS x(m, t) GROUP BY m"
            " ON CONFLICT(run, metric) DO UPDATE SET total=metrics.total+excluded.total",
            pg::Params().add(run).array(rows.total_metric).array(rows.total));
    c.query("add_run",
            "UPDATE runs SET stack_count=$2, frame_count=$3, ended_ns=GREATEST(ended_ns, $4),"
            " started_ns=CASE WHEN $5>0 AND $5<started_ns THEN $5 ELSE started_ns END,"
            " bytes=bytes+$6, version=version+1 WHERE id=$1",
            pg::Params()
                .add(run)
                .add(dict.stack_count)
                .add(static_cast<int64_t>(dict.names.size()))
                .add(data.until_ns)
                .add(data.from_ns)
                .add(rows.bytes));
  }

  bool delete_in(pg::Conn& c, int64_t id) {
    static const char* const tables[][2] = {{"del_samples", "DELETE FROM samples WHERE run=$1"},
                                            {"del_stacks", "DELETE FROM stacks WHERE run=$1"},
                                            {"del_frames", "DELETE FROM frames WHERE run=$1"},
                                            {"del_tags", "DELETE FROM tags WHERE run=$1"},
                                            {"del_metrics", "DELETE FROM metrics WHERE run=$1"},
                                            {"del_chunks", "DELETE FROM chunks WHERE run=$1"}};
    for (const auto& t : tables) c.query(t[0], t[1], pg::Params().add(id));
    return c.query("del_run", "DELETE FROM runs WHERE id=$1", pg::Params().add(id)).affected() > 0;
  }

  int64_t stored_bytes(pg::Conn& c) {
    return c.query("stored_bytes", "SELECT COALESCE(SUM(bytes), 0) FROM runs").i64(0, 0);
  }

  static RunInfo read_run(const pg::Result& r, int i) {
    RunInfo info;
    info.id = r.i64(i, 0);
    info.name = r.text(i, 1);
    info.source = r.text(i, 2);
    info.status = r.text(i, 3);
    info.started_ns = r.i64(i, 4);
    info.ended_ns = r.i64(i, 5);
    info.hz = r.dbl(i, 6);
    if (!r.null(i, 7)) info.stats_json = r.text(i, 7);
    info.stack_count = r.i64(i, 8);
    info.version = r.i64(i, 9);
    return info;
  }

  // Tags and totals of `runs`, two queries for the whole page.
  static void fill_runs(pg::Conn& c, std::vector<RunInfo>& runs) {
    if (runs.empty()) return;
    std::vector<int64_t> ids;
    std::unordered_map<int64_t, RunInfo*> by_id;
    for (RunInfo& r : runs) { ids.push_back(r.id); by_id[r.id] = &r; }
    auto t = c.query("fill_tags", "SELECT run, key, value FROM tags WHERE run=ANY($1::int8[])",
                     pg::Params().array(ids));
    for (int i = 0; i < t.rows(); ++i) by_id[t.i64(i, 0)]->tags.emplace(t.text(i, 1), t.text(i, 2));
    auto m = c.query("fill_totals", "SELECT run, metric, total FROM metrics WHERE run=ANY($1::int8[])",
                     pg::Params().array(ids));
    for (int i = 0; i < m.rows(); ++i)
      by_id[m.i64(i, 0)]->totals[static_cast<int>(m.i64(i, 1))] = m.dbl(i, 2);
  }

  StoreOptions opts_;
  pg::Pool pool_;
  std::mutex dict_mu_;
  std::unordered_map<int64_t, std::shared_ptr<RunDict>> dicts_;
  std::mutex leader_mu_;
  std::unique_ptr<pg::Conn> leader_;
};

}  // namespace

std::unique_ptr<Store> open_pg_store(const std::string& url, const StoreOptions& opts) {
  return std::make_unique<PgStore>(url, opts);
}

}  // namespace lfs

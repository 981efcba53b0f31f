// The store of profile runs, behind an interface that two databases implement:
// SqliteStore (sqlite_store.cpp, the embedded default) and the PostgreSQL store.
//
// Model: a run has metadata (name, tags, status, source, times), a set of metrics, and a
// call tree kept as a tree everywhere: frame names interned once per run, nodes (parent id,
// frame id) interned once per run, and 64-bit integer self values per node, metric and time
// bucket. Buckets exist at several resolutions (StoreOptions::resolutions, for example 1 s,
// 10 s, 1 min, 10 min, 1 h, 1 d), each kept for its own time, and the whole run's merged tree
// is maintained as data arrives, so a read costs what it shows, not how long the run is.
// Metrics are numbered by their index in lfw::kMetricList (samples=0, time=1, calls=2,
// alloc_bytes=3, alloc_count=4, live_bytes=5,
// live_count=6).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lfs {

using Tags = std::map<std::string, std::string>;

/// Metric index from its name, -1 when unknown.
int metric_index(std::string_view name);
/// Metric name from its index ("?" when out of range).
std::string_view metric_name(int index);
/// Units of a metric's values: "samples", "ns", "calls", "bytes", "count" (lfw::kMetricList).
std::string_view metric_units(int index);

/// A value or a sum does not fit the store's 64-bit integers (or is negative): the request
/// is refused whole (handlers answer 400), nothing is stored, never a wrapped or infinite sum.
struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A limit was hit (distinct stacks or nodes per run): the request is refused whole (413).
struct LimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// a + b for values >= 0; ValueError naming `what` when the sum overflows int64.
inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &out))
    throw ValueError(std::string(what) + ": the sum does not fit a 64-bit integer (at most " +
                     std::to_string(std::numeric_limits<int64_t>::max()) + ")");
  return out;
}

/// A run as listed and shown.
struct RunInfo {
  int64_t id = 0;
  std::string name;
  Tags tags;
  std::string status;  ///< "live" or "finished"
  std::string source;  ///< "upload", "stream" or "ingest"
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  double hz = 0;
  std::string stats_json;         ///< the collector's stats at finish ("" when none)
  std::map<int, int64_t> totals;  ///< metric index -> total (retained data)
  int64_t stack_count = 0;        ///< distinct stacks (nodes that ever had a value)
  /// Grows at every change of the run's data (append, finish, retention trim): a cache of a
  /// view keyed by (id, revision) is valid across requests and across servers.
  int64_t revision = 0;
};

/// What a new run is.
struct NewRun {
  std::string name;
  Tags tags;
  std::string source = "upload";
  std::string stream;    ///< stream key (uuid, or "ingest:..."); "" for uploads
  bool finished = true;  ///< uploads are finished at once
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  double hz = 0;
  std::vector<int> metrics;  ///< metric indexes the run has
};

/// A call tree with values, for one time window: what uploads, chunks and pprof profiles
/// become (see batch.hpp's BatchBuilder). No string per stack: frames are named once,
/// nodes name their parent.
struct Batch {
  struct Node {
    int32_t parent = -1;  ///< an earlier node's index, or -1 (a root frame)
    uint32_t frame = 0;   ///< index into frames
  };
  std::vector<int> metrics;         ///< column -> metric index
  int64_t from_ns = 0;              ///< window start (the bucket is derived from it)
  int64_t until_ns = 0;             ///< window end; extends the run's ended_ns
  std::vector<std::string> frames;  ///< frame names (this batch's own numbering)
  std::vector<Node> nodes;          ///< parent before child; a (parent, frame) pair may repeat
  /// Self values, >= 0: node i, column c at [i * metrics.size() + c].
  std::vector<int64_t> values;

  int64_t value(std::size_t node, std::size_t col) const {
    return values[node * metrics.size() + col];
  }
};

/// A run's tree as read for a view: the run's frames and nodes by id (parent before child),
/// and the summed self values of the nodes that have one in the view.
struct StoredTree {
  std::vector<std::string> frames;
  std::vector<Batch::Node> nodes;                    ///< node id -> (parent id or -1, frame id)
  std::vector<std::pair<uint32_t, int64_t>> values;  ///< (node id, value != 0), ascending ids
};

/// Filter and page of a run listing. Paging is by cursor: pass the previous page's
/// next_cursor as before_id. offset still works (it skips rows: its cost grows with it).
struct RunFilter {
  std::string name;    ///< exact name, "" = any
  Tags tags;           ///< every tag must match
  std::string status;  ///< "live", "finished" or "" = any
  int64_t limit = 50;
  int64_t before_id = 0;  ///< only runs with id < before_id; 0 = from the newest
  int64_t offset = 0;
};

struct RunList {
  std::vector<RunInfo> runs;
  int64_t total = 0;        ///< runs matching the filter (see total_exact)
  bool total_exact = true;  ///< false: total is a lower bound (counting stopped early)
  int64_t next_cursor = 0;  ///< before_id of the next page; 0 when this is the last
};

// ---- The listing policy every store follows (its SQL is each store's own) ----
// Newest first (id descending); a page is read with LIMIT limit + 1 from before_id (or the
// newest) and offset; the total is counted up to a cap: a page never pays for a million
// matches.

/// Counting a listing's total stops past this (the total is then a lower bound).
inline constexpr int64_t kListCountCap = 10000;
/// The same when each match counted costs a run lookup (a condition the walked index does
/// not cover).
inline constexpr int64_t kListJoinCountCap = 1000;
/// Cuts rows read with LIMIT limit + 1 to the page: the extra row says another page follows,
/// whose cursor is the last row kept. True when this is the last page.
bool finish_page(const RunFilter& f, RunList& out);
/// When the page holds the whole answer (the last page, read from the newest), its total is
/// counted from the page itself: true then, and out.total is set.
bool total_from_page(const RunFilter& f, bool last_page, RunList& out);
/// Sets a capped count as the total: not exact past `cap`.
void set_capped_total(int64_t counted, int64_t cap, RunList& out);

/// One timeline point: a bucket's start, width and value.
struct TimePoint {
  int64_t t_ns = 0;
  int64_t width_ns = 0;
  int64_t value = 0;
};

/// Size of the store.
struct StoreStats {
  int64_t runs = 0;
  int64_t live_runs = 0;
  int64_t stored_bytes = 0;  ///< bytes of the database in use
  int64_t file_bytes = 0;    ///< database (+ WAL) on disk
};

/// One resolution of time buckets and how long its buckets are kept.
struct Resolution {
  int64_t width_ns = 0;  ///< bucket width; each a multiple of the previous (finer) one
  int64_t keep_ns = 0;   ///< buckets that ended more than this ago are dropped; 0 = kept
};

/// What one retention pass does.
struct RetainOptions {
  int64_t now_ns = 0;         ///< the clock (tests pass their own)
  int64_t older_than_ns = 0;  ///< delete finished runs that ended before this; 0 = none
  int64_t keep_runs = 0;      ///< keep only the newest N runs (finished ones deleted); 0 = all
  uint64_t budget_bytes = 0;  ///< delete the oldest finished runs while above; 0 = none
  bool trim = true;           ///< drop buckets past each resolution's keep_ns (live runs too)
};

struct RetainResult {
  std::vector<int64_t> deleted;  ///< runs deleted
  std::vector<int64_t> trimmed;  ///< runs whose data retention changed (caches of them are stale)
  int64_t buckets_trimmed = 0;   ///< buckets dropped by per-resolution retention
  int64_t bytes_freed = 0;       ///< bytes given back to the file system
};

/// The steps of a retention pass, each a store's SQL; the policy (which
/// runs go, in what order, when it stops) is retain_runs's alone.
class RetainSteps {
 public:
  virtual ~RetainSteps() = default;
  /// Finished runs that ended before `ns`.
  virtual std::vector<int64_t> finished_before(int64_t ns) = 0;
  /// Finished runs older than the newest `keep` runs (live ones among those counted).
  virtual std::vector<int64_t> finished_beyond(int64_t keep) = 0;
  /// The oldest finished run, if any.
  virtual std::optional<int64_t> oldest_finished() = 0;
  /// Deletes the run and all it holds in one short transaction (readers are
  /// never blocked, writers wait briefly); false when it was already gone.
  virtual bool delete_run(int64_t id) = 0;
  /// Per-resolution retention (RetainOptions::trim): the buckets dropped;
  /// the runs whose data changed are appended to `touched`.
  virtual int64_t trim(const RetainOptions& o, std::vector<int64_t>& touched) = 0;
  /// The bytes the budget holds the store to.
  virtual uint64_t stored_bytes() = 0;
};

/// One retention pass over a store's steps: finished runs that ended before
/// older_than and those beyond the newest keep_runs are deleted (oldest
/// first), buckets past each resolution's keep are trimmed, then the oldest
/// finished runs go while the store is above its budget. `deleted` and
/// `trimmed` come out sorted, without repeats; bytes_freed is the store's.
RetainResult retain_runs(RetainSteps& steps, const RetainOptions& o);

enum class AppendStatus { ok, duplicate, finished, not_found };

class Store {
 public:
  virtual ~Store() = default;

  /// Stores a finished run and its tree in one transaction. Returns the id.
  /// LimitError / ValueError: nothing stored. The store takes the frame names
  /// out of `data` rather than copying them (an upload's names are held once).
  virtual int64_t create_run(const NewRun& run, Batch&& data) = 0;
  int64_t create_run(const NewRun& run, const Batch& data) { return create_run(run, Batch(data)); }
  /// Creates a live run keyed by run.stream, or returns the existing one.
  /// `created` tells which.
  virtual int64_t open_stream(const NewRun& run, bool& created) = 0;
  /// Adds a chunk to a live run, once per seq (seq < 0: no dedupe). LimitError /
  /// ValueError (a sum would overflow): nothing stored.
  virtual AppendStatus append(int64_t run, int64_t seq, const Batch& data) = 0;
  /// Marks a live run finished. False when unknown.
  virtual bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) = 0;
  /// Finishes, in one statement, every live run that got no data since `before_ns` by the
  /// server's clock when the data arrived (runs.touched_ns: set when the run is made and at
  /// each append), never by the data's own times: a stream backfilling hours-old samples is
  /// busy, not idle. Returns the runs finished.
  virtual std::vector<int64_t> finish_idle(int64_t before_ns) = 0;

  virtual std::optional<RunInfo> get_run(int64_t id) = 0;
  virtual RunList list_runs(const RunFilter& filter) = 0;
  /// Latest finished run named `name` carrying all `tags`, other than `exclude`.
  virtual std::optional<int64_t> latest_run(const std::string& name, const Tags& tags,
                                            int64_t exclude) = 0;
  /// The tree of `metric` with values summed over the buckets starting in [from_ns, until_ns),
  /// from one snapshot. from = INT64_MIN and until = INT64_MAX: the whole run (its maintained
  /// merged tree). A range is covered by the coarsest buckets that fit inside it, finer ones at
  /// its edges; where finer buckets were already dropped by retention, the coarser bucket
  /// holding the edge is read whole.
  virtual void read_tree(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                         StoredTree& out) = 0;
  /// Values of `metric` per bucket (only non-empty buckets), in time order, from the coarsest
  /// resolution whose width is at most step_ns (the finest when none is), coarser where finer
  /// buckets were dropped.
  virtual std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns,
                                          int64_t until_ns, int64_t step_ns) = 0;
  virtual bool delete_run(int64_t id) = 0;

  /// Retention (see RetainOptions).
  virtual RetainResult retain(const RetainOptions& opts) = 0;
  /// Gives the space of deleted runs back to the file system (SQLite: its
  /// free pages, then the WAL); bytes given back. A no-op where the store's
  /// disk is not this server's (PostgreSQL).
  virtual int64_t give_back_space() { return 0; }
  /// Whether this process is the one that runs retention (true for a store of its own; on a
  /// shared database only the holder of a lock). Asked before each retention pass.
  virtual bool leads_retention() { return true; }
  virtual StoreStats stats() = 0;
  /// Waits for writes to end and closes the database cleanly.
  virtual void close() = 0;
};

/// 1 s for a day, 10 s for a day, 1 min and 10 min for a week, 1 h and 1 d for 30 days.
std::vector<Resolution> default_resolutions();

/// Parses "1s:1d,1m:7d,1h:30d" (width:keep, keep 0 = forever; units s m h d). Widths must
/// grow, each a multiple of the one before. Returns "" or the reason it is refused.
std::string parse_resolutions(std::string_view text, std::vector<Resolution>& out);

struct StoreOptions {
  /// Most distinct stacks per run (a run's tree holds at most 8x as many nodes); more is a
  /// LimitError. Default 1,000,000.
  std::size_t max_stacks = 1000000;
  /// Bucket resolutions, finest first. Default default_resolutions().
  std::vector<Resolution> resolutions = default_resolutions();
  /// SQLite synchronous=FULL: each COMMIT is fsynced, so acknowledged runs survive power loss too.
  /// false: synchronous=NORMAL, which in WAL mode survives a crash or kill -9 of the server
  /// but may lose the last commits on power loss. Default true.
  bool sync_full = true;
};

/// Opens (creating and migrating) the SQLite store in `dir`/luaflame.db.
/// Throws std::runtime_error with a message on failure.
std::unique_ptr<Store> open_sqlite_store(const std::string& dir, const StoreOptions& opts);

/// Opens the store named by `url`: "sqlite:DIR" or a plain folder (SQLite); other schemes
/// (postgresql://) where built in. Throws std::runtime_error when unknown.
std::unique_ptr<Store> open_store(const std::string& url, const StoreOptions& opts);
/// `url` fit for a log line (a password in it replaced by ***).
std::string describe_store(const std::string& url);

// ---- Source texts of a run (issue 17, web helper) -----------------------------
// Kept apart from Store so the run store can be rewritten or replaced
// (PostgreSQL) without touching this: a backend implements these four calls.
// Keys are the collector's SOURCE of `NAME SOURCE:LINE` frames (Lua's
// short_src: "app.lua", "lib/util.lua", "...long/path.lua").

/// One stored source file.
struct SourceFile {
  std::string path;
  std::string text;
};

class SourceStore {
 public:
  virtual ~SourceStore() = default;
  /// Stores (replacing by path) `files` for `run`, in one transaction.
  virtual void put_sources(int64_t run, const std::vector<SourceFile>& files) = 0;
  /// The text of `path` for `run`, or nullopt.
  virtual std::optional<std::string> get_source(int64_t run, const std::string& path) = 0;
  /// Paths and sizes in bytes of a run's files, by path.
  virtual std::vector<std::pair<std::string, int64_t>> list_sources(int64_t run) = 0;
  /// Drops a deleted run's files.
  virtual void drop_sources(int64_t run) = 0;
};

/// Opens (creating) the SQLite source store `dir`/sources.db (its own file, WAL).
/// Throws std::runtime_error with a message on failure.
std::unique_ptr<SourceStore> open_sqlite_sources(const std::string& dir);
/// The source store in the PostgreSQL database `url` (table sources, created when missing), shared
/// by every server on that database. Throws std::runtime_error on failure.
std::unique_ptr<SourceStore> open_pg_sources(const std::string& url);
/// The source store that goes with the run store `url`: PostgreSQL's for a postgresql:// store,
/// nullptr for SQLite (the server opens DATA/sources.db on first use, App::sources()).
std::unique_ptr<SourceStore> open_store_sources(const std::string& url);
// ---- end of source texts ------------------------------------------------------

}  // namespace lfs

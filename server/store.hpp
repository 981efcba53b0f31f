// The store of profile runs, behind an interface so another database could
// serve several server instances later. SqliteStore is the one implementation.
//
// Model: a run has metadata (name, tags, status, source, times), a set of
// metrics, frames interned once per run, and stacks interned once per run
// (each a short string of frame ids, not the text: ~10x smaller). Values are kept per
// (metric, time bucket, stack), so a part of a long run can be merged
// (from/until) and a timeline drawn. Metrics are numbered by their index in
// lfw::kMetrics (samples=0, time=1, calls=2, alloc_bytes=3, alloc_count=4,
// live_bytes=5).
#pragma once

#include <cstdint>
#include <functional>
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
/// Metric name from its index.
std::string_view metric_name(int index);
/// Display units of a metric: "samples", "ns", "calls", "bytes", "count".
std::string_view metric_units(int index);

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
  std::string stats_json;              ///< the collector's stats at finish ("" when none)
  std::map<int, double> totals;        ///< metric index -> total
  int64_t stack_count = 0;
};

/// What a new run is.
struct NewRun {
  std::string name;
  Tags tags;
  std::string source = "upload";
  std::string stream;         ///< stream key (uuid, or "ingest:..."); "" for uploads
  bool finished = true;       ///< uploads are finished at once
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  double hz = 0;
  std::vector<int> metrics;   ///< metric indexes the run has
};

/// Stacks with one value per column, for one time bucket.
struct Batch {
  std::vector<int> metrics;  ///< column -> metric index
  int64_t from_ns = 0;       ///< window start (the bucket is derived from it)
  int64_t until_ns = 0;      ///< window end; extends the run's ended_ns
  std::vector<std::pair<std::string, std::vector<double>>> stacks;
};

/// Filter and page of a run listing.
struct RunFilter {
  std::string name;  ///< exact name, "" = any
  Tags tags;         ///< every tag must match
  std::string status;  ///< "live", "finished" or "" = any
  int64_t limit = 50;
  int64_t offset = 0;
};

struct RunList {
  std::vector<RunInfo> runs;
  int64_t total = 0;
};

/// One timeline point: bucket start and value.
struct TimePoint {
  int64_t t_ns = 0;
  double value = 0;
};

/// Size of the store.
struct StoreStats {
  int64_t runs = 0;
  int64_t live_runs = 0;
  int64_t stored_bytes = 0;  ///< bytes of the database in use
  int64_t file_bytes = 0;    ///< database + WAL on disk
};

/// A limit was hit (distinct stacks per run): the request is refused whole.
struct LimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class AppendStatus { ok, duplicate, finished, not_found };

class Store {
 public:
  virtual ~Store() = default;

  /// Stores a finished run and its stacks in one transaction. Returns the id.
  virtual int64_t create_run(const NewRun& run, const Batch& data) = 0;
  /// Creates a live run keyed by run.stream, or returns the existing one.
  /// `created` tells which.
  virtual int64_t open_stream(const NewRun& run, bool& created) = 0;
  /// Adds a chunk to a live run, once per seq (seq < 0: no dedupe).
  virtual AppendStatus append(int64_t run, int64_t seq, const Batch& data) = 0;
  /// Marks a live run finished. False when unknown.
  virtual bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) = 0;

  virtual std::optional<RunInfo> get_run(int64_t id) = 0;
  virtual RunList list_runs(const RunFilter& filter) = 0;
  /// Latest finished run named `name` carrying all `tags`, other than `exclude`.
  virtual std::optional<int64_t> latest_run(const std::string& name, const Tags& tags, int64_t exclude) = 0;
  /// Calls fn(stack, value) for each stack of `metric` with its value summed over buckets
  /// starting in [from_ns, until_ns).
  virtual void read_stacks(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                           const std::function<void(std::string_view, double)>& fn) = 0;
  /// The same with frames as the run's frame ids: `frames(names)` is called once with the
  /// run's frame names (indexed by id), then fn(ids, count, value) per stack, root first.
  /// Both come from one snapshot.
  virtual void read_paths(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                          const std::function<void(const std::vector<std::string>&)>& frames,
                          const std::function<void(const uint32_t*, std::size_t, double)>& fn) = 0;
  /// Values of `metric` per bucket (only non-empty buckets), in time order.
  virtual std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns) = 0;
  virtual bool delete_run(int64_t id) = 0;

  /// Retention: deletes finished runs older than `older_than_ns` (0 = none), beyond the newest
  /// `keep_runs` (0 = none), and oldest first while the store is above `budget_bytes` (0 = none).
  /// Returns the ids deleted.
  virtual std::vector<int64_t> retain(int64_t older_than_ns, int64_t keep_runs, uint64_t budget_bytes) = 0;
  virtual StoreStats stats() = 0;
  /// Waits for writes to end and closes the database cleanly.
  virtual void close() = 0;
};

struct StoreOptions {
  /// Most distinct stacks per run; more is a LimitError. Default 1,000,000.
  std::size_t max_stacks = 1000000;
  /// Width of a time bucket in ns: values are summed per bucket. Default 1 s.
  int64_t bucket_ns = 1000000000;
  /// SQLite synchronous=FULL: each COMMIT is fsynced, so acknowledged runs survive power loss too.
  /// false: synchronous=NORMAL, which in WAL mode survives a crash or kill -9 of the server
  /// but may lose the last commits on power loss. Default true.
  bool sync_full = true;
};

/// Opens (creating and migrating) the SQLite store in `dir`/luaflame.db.
/// Throws std::runtime_error with a message on failure.
std::unique_ptr<Store> open_sqlite_store(const std::string& dir, const StoreOptions& opts);

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
// ---- end of source texts ------------------------------------------------------

}  // namespace lfs

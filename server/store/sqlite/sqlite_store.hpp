// SqliteStore, the Store on one SQLite file in WAL mode: its state and who
// touches it, for the files that implement it (sqlite_store.cpp: the file,
// the connections and the writes; sqlite_read.cpp: the reads;
// sqlite_list.cpp: the listing). Others reach it through open_sqlite_store
// (store.hpp) only.
//
// One write connection behind write_mu_ (SQLite has one writer anyway) and a
// pool of read connections behind pool_mu_: in WAL mode readers see the last
// commit and are never blocked by a writer.
#pragma once

#include <sqlite3.h>

#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/batch.hpp"
#include "store/sqlite/sqlite_util.hpp"
#include "store/store.hpp"

namespace lfs {

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& dir, const StoreOptions& opts);
  // Not close(): a virtual call from a destructor would not dispatch past this class (and the
  // analyzer's optin.cplusplus.VirtualCall flags it); both share shut().
  ~SqliteStore() override { shut(); }

  // Writes (sqlite_store.cpp): each one transaction on the writer, under write_mu_.
  using Store::create_run;
  int64_t create_run(const NewRun& run, Batch&& data) override;
  int64_t open_stream(const NewRun& run, bool& created) override;
  AppendStatus append(int64_t run, int64_t seq, const Batch& data) override;
  bool finish(int64_t run, const std::string& stats_json, int64_t ended_ns) override;
  std::vector<int64_t> finish_idle(int64_t before_ns) override;
  bool delete_run(int64_t id) override;
  RetainResult retain(const RetainOptions& o) override;
  int64_t give_back_space() override;
  void close() override { shut(); }

  // Reads (sqlite_read.cpp): each on a pooled reader, in one snapshot.
  std::optional<RunInfo> get_run(int64_t id) override;
  RunList list_runs(const RunFilter& f) override;
  std::optional<int64_t> latest_run(const std::string& name, const Tags& tags,
                                    int64_t exclude) override;
  void read_tree(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                 StoredTree& out) override;
  std::vector<TimePoint> timeline(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                                  int64_t step_ns) override;
  StoreStats stats() override;

 private:
  static constexpr int64_t kWhole = 0;  // the width under which a run's merged tree is kept
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Live runs' dictionaries kept in memory by the writer, in nodes.
  static constexpr std::size_t kTreeCacheNodes = 8u << 20;

  // A read connection borrowed from the pool for one call.
  struct Reader {
    SqliteStore& s;
    sqlite3* db;
    explicit Reader(SqliteStore& st) : s(st), db(st.borrow()) {}
    ~Reader() { s.give_back(db); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
  };
  sqlite3* borrow();
  void give_back(sqlite3* db);
  // Closes the readers and the writer (after checkpointing the WAL); once.
  void shut();
  void check_open() const {
    if (!writer_) throw std::runtime_error("store: closed");
  }
  static int64_t used_bytes(sqlite3* db) {
    return (sql::pragma(db, "PRAGMA page_count") - sql::pragma(db, "PRAGMA freelist_count")) *
           sql::pragma(db, "PRAGMA page_size");
  }
  // Reads a run's dictionary (frames and nodes, appended in blobs) on `db`.
  static void load_dict(sqlite3* db, int64_t run, std::vector<std::string>& frames,
                        std::vector<Batch::Node>& nodes);
  // First bucket start each resolution still holds for (run, metric); kMax when none.
  std::vector<int64_t> horizons(sqlite3* db, int64_t run, int metric) const;

  // The writer's side, under write_mu_.
  RunTree& tree_of(int64_t run);
  int64_t insert_run(const NewRun& run);
  void add_batch(int64_t run, const Batch& b, RunTree& tree, bool all_resolutions,
                 Batch* owner = nullptr);
  void merge_bucket(int64_t run, int metric, int64_t width, int64_t bucket, const Values& add,
                    int64_t sum, int sign);
  int64_t trim(const RetainOptions& o, std::vector<int64_t>& changed);
  struct Retain;
  bool delete_locked(int64_t id);
  int64_t give_back_locked();

  StoreOptions opts_;
  std::string path_;
  sqlite3* writer_ = nullptr;
  std::mutex write_mu_;
  std::mutex pool_mu_;
  std::vector<sqlite3*> pool_;                  // under pool_mu_
  std::unordered_map<int64_t, RunTree> trees_;  // writer only (under write_mu_)
  sql::StmtCache wc_;                           // the writer's statements (under write_mu_)
};

}  // namespace lfs

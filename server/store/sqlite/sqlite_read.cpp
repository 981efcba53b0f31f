// SqliteStore's reads (sqlite_store.hpp): each on a connection borrowed from
// the pool, in one snapshot where it reads more than one statement.
#include <algorithm>
#include <filesystem>

#include "store/sqlite/sqlite_list.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace lfs {

using sql::Stmt;
using sql::Txn;

RunList SqliteStore::list_runs(const RunFilter& f) {
  Reader r(*this);
  return sqlite_list_runs(r.db, f);
}

std::optional<RunInfo> SqliteStore::get_run(int64_t id) {
  Reader r(*this);
  Stmt q(r.db, std::string(kSqliteRunColumns) + " FROM runs WHERE id=?");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  RunInfo info = sqlite_read_run(q);
  q.reset();
  sqlite_fill_run(r.db, info);
  return info;
}

std::optional<int64_t> SqliteStore::latest_run(const std::string& name, const Tags& tags,
                                               int64_t exclude) {
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

void SqliteStore::read_tree(int64_t run, int metric, int64_t from_ns, int64_t until_ns,
                            StoredTree& out) {
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
    for (const Piece& p : cover(from_ns, until_ns, opts_.resolutions, horizons(r.db, run, metric)))
      read(opts_.resolutions[static_cast<std::size_t>(p.level)].width_ns, p.lo, p.hi);
  }
  for (std::size_t i = 0; i < dense.size(); ++i)
    if (dense[i] != 0) out.values.emplace_back(static_cast<uint32_t>(i), dense[i]);
  snapshot.commit();
}

std::vector<TimePoint> SqliteStore::timeline(int64_t run, int metric, int64_t from_ns,
                                             int64_t until_ns, int64_t step_ns) {
  Reader r(*this);
  Txn snapshot(r.db, "BEGIN");
  std::vector<TimePoint> out;
  Stmt q(r.db,
         "SELECT bucket, SUM(total) FROM buckets WHERE run=? AND metric=? AND width=? AND "
         "bucket>=? AND bucket<? GROUP BY bucket ORDER BY bucket DESC");  // a bucket's parts
  for (const Piece& p : timeline_pieces(from_ns, until_ns, step_ns, opts_.resolutions,
                                        horizons(r.db, run, metric))) {
    const int64_t w = opts_.resolutions[static_cast<std::size_t>(p.level)].width_ns;
    q.bind(1, run).bind(2, metric).bind(3, w).bind(4, p.lo).bind(5, p.hi);
    while (q.step()) out.push_back({q.i64(0), w, q.i64(1)});
    q.reset();
  }
  std::reverse(out.begin(), out.end());
  snapshot.commit();
  return out;
}

StoreStats SqliteStore::stats() {
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

// First bucket start each resolution still holds for (run, metric); kMax when none.
std::vector<int64_t> SqliteStore::horizons(sqlite3* db, int64_t run, int metric) const {
  std::vector<int64_t> out;
  Stmt q(db, "SELECT MIN(bucket) FROM buckets WHERE run=? AND metric=? AND width=?");
  for (const Resolution& res : opts_.resolutions) {
    q.bind(1, run).bind(2, metric).bind(3, res.width_ns);
    out.push_back(q.step() && !q.is_null(0) ? q.i64(0) : kMax);
    q.reset();
  }
  return out;
}

}  // namespace lfs

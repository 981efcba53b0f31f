// The SQLite store's schema and its migrations (PRAGMA user_version).
//
// 1: runs, tags, metrics, stacks as text, values per (metric, 1 s bucket, stack).
// 2: frames interned per run, a stack as varint frame ids.
// 3: the tree form: a run's dictionary (frames, nodes with parent ids) in appended blobs,
//    integer values per (metric, resolution, bucket) as one blob of (node, value) pairs,
//    the whole run's merged tree under resolution 0, run counters for listing.
// 4: the run's name copied into its tag rows (a name never changes) and indexed with the tag,
//    so a name + tag listing walks exactly its matches (tags_kvn), not one condition's rows.
// 5: a bucket is a few parts (rows): its key is no longer unique.
// 6: runs.touched_ns, when the run last got data by the server's clock.
#include "store/sqlite/sqlite_schema.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <unordered_map>

#include "luaflame/folded.hpp"
#include "store/batch.hpp"
#include "store/sqlite/sqlite_util.hpp"

namespace lfs {
namespace {

using sql::exec;
using sql::Stmt;

const char* const kSchemaV1 =
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

const char* const kSchemaV3 = R"(
       ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
       CREATE INDEX runs_status ON runs(status, id);
       CREATE INDEX runs_name_status ON runs(name, status, id);
       CREATE INDEX runs_ended ON runs(status, ended_ns);
       CREATE TABLE dict(run INTEGER NOT NULL, kind INTEGER NOT NULL, first INTEGER NOT NULL,
         data BLOB NOT NULL, PRIMARY KEY(run, kind, first));
       CREATE TABLE buckets(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, metric INTEGER NOT NULL,
         width INTEGER NOT NULL, bucket INTEGER NOT NULL, total INTEGER NOT NULL, data BLOB NOT NULL);
       CREATE UNIQUE INDEX buckets_key ON buckets(run, metric, width, bucket);
       CREATE INDEX buckets_age ON buckets(width, bucket);
       ALTER TABLE metrics RENAME TO metrics_v2;
       CREATE TABLE metrics(run INTEGER NOT NULL, metric INTEGER NOT NULL, total INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY(run, metric)) WITHOUT ROWID;
       CREATE TABLE run_counts(status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
       INSERT INTO run_counts SELECT 'live', COUNT(*) FROM runs WHERE status='live';
       INSERT INTO run_counts SELECT 'finished', COUNT(*) FROM runs WHERE status<>'live';
       CREATE TRIGGER runs_ins AFTER INSERT ON runs BEGIN
         UPDATE run_counts SET n=n+1 WHERE status=new.status; END;
       CREATE TRIGGER runs_del AFTER DELETE ON runs BEGIN
         UPDATE run_counts SET n=n-1 WHERE status=old.status; END;
       CREATE TRIGGER runs_upd AFTER UPDATE OF status ON runs WHEN old.status<>new.status BEGIN
         UPDATE run_counts SET n=n-1 WHERE status=old.status;
         UPDATE run_counts SET n=n+1 WHERE status=new.status; END;)";

const char* const kSchemaV4 = R"(
       ALTER TABLE tags ADD COLUMN name TEXT NOT NULL DEFAULT '';
       UPDATE tags SET name=(SELECT name FROM runs WHERE runs.id=tags.run);
       CREATE INDEX tags_kvn ON tags(key, value, name, run);)";

// 5: a bucket is a few parts (rows) that reads add up (batch.hpp, parts_to_merge), so its key
// is no longer unique.
const char* const kSchemaV5 = R"(
       DROP INDEX buckets_key;
       CREATE INDEX buckets_key ON buckets(run, metric, width, bucket);)";

// 6: when a run last got data by the server's clock (touched_ns), for finishing idle live
// runs (Store::finish_idle); a live run at the upgrade counts as touched then.
const char* const kSchemaV6 = R"(
       ALTER TABLE runs ADD COLUMN touched_ns INTEGER NOT NULL DEFAULT 0;)";

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
    if (c & 0x80) {
      shift += 7;
      continue;
    }
    ids.push_back(v);
    v = 0;
    shift = 0;
  }
  return shift == 0;
}

// v1 kept each stack's text; v2 interns frames and keeps ids (same stack ids).
void migrate_v2(sqlite3* db) {
  exec(db, R"(CREATE TABLE frames(run INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL,
                PRIMARY KEY(run, id)) WITHOUT ROWID;
              CREATE TABLE stacks2(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, hash INTEGER NOT NULL,
                path BLOB NOT NULL);)");
  {
    Stmt old(db, "SELECT id, run, text FROM stacks ORDER BY run, id");
    Stmt ins(db, "INSERT INTO stacks2(id, run, hash, path) VALUES(?, ?, 0, ?)");
    Stmt fr(db, "INSERT INTO frames(run, id, name) VALUES(?, ?, ?)");
    int64_t run = -1;
    std::unordered_map<std::string, uint32_t> dict;
    std::string blob;
    while (old.step()) {
      if (old.i64(1) != run) {
        run = old.i64(1);
        dict.clear();
      }
      blob.clear();
      for (std::string_view f : lf::split_stack(old.text(2))) {
        auto [it, added] = dict.emplace(std::string(f), static_cast<uint32_t>(dict.size()));
        if (added) fr.bind(1, run).bind(2, static_cast<int64_t>(it->second)).bind(3, f).run();
        put_varint(blob, it->second);
      }
      ins.bind(1, old.i64(0)).bind(2, run).blob(3, blob).run();
    }
  }
  exec(db, "DROP TABLE stacks; ALTER TABLE stacks2 RENAME TO stacks;");
}

// v2 -> v3: every run's stacks become a tree and its values per 1 s bucket become batches
// stored through the same path as new data. REAL values are rounded to integers.
void migrate_v3(sqlite3* db, const std::function<void(int64_t, const Batch&)>& add) {
  exec(db, kSchemaV3);
  std::vector<int64_t> runs;
  {
    Stmt q(db, "SELECT id FROM runs ORDER BY id");
    while (q.step()) runs.push_back(q.i64(0));
  }
  for (int64_t run : runs) {
    std::vector<std::string> names;
    {
      Stmt f(db, "SELECT id, name FROM frames WHERE run=? ORDER BY id");
      f.bind(1, run);
      while (f.step()) {
        auto id = static_cast<std::size_t>(f.i64(0));
        if (id >= names.size()) names.resize(id + 1);
        names[id] = f.text(1);
      }
    }
    std::vector<int> metrics;
    {
      Stmt m(db, "SELECT metric FROM metrics_v2 WHERE run=? ORDER BY metric");
      m.bind(1, run);
      while (m.step()) metrics.push_back(static_cast<int>(m.i64(0)));
    }
    {
      Stmt t(db, "INSERT OR IGNORE INTO metrics(run, metric, total) VALUES(?, ?, 0)");
      for (int m : metrics) t.bind(1, run).bind(2, m).run();
    }
    // One batch per bucket, every metric a column.
    std::map<int64_t, Batch> by_bucket;
    std::map<int64_t, BatchBuilder> builders;
    Stmt q(db,
           "SELECT v.bucket, v.metric, s.path, v.value FROM samples v JOIN stacks s ON s.id=v.stack"
           " WHERE v.run=? ORDER BY v.bucket");
    q.bind(1, run);
    std::vector<uint32_t> ids;
    while (q.step()) {
      int64_t bucket = q.i64(0);
      auto col = std::find(metrics.begin(), metrics.end(), static_cast<int>(q.i64(1)));
      if (col == metrics.end()) continue;
      if (!decode_path(q.blob(2), ids) || ids.empty()) continue;
      const double v = std::llround(q.dbl(3));
      if (!(v > 0) || v > 9.2e18) continue;
      Batch& b = by_bucket[bucket];
      if (b.metrics.empty()) {
        b.metrics = metrics;
        b.from_ns = b.until_ns = bucket;
      }
      BatchBuilder& bb = builders.try_emplace(bucket, b).first->second;
      int32_t node = -1;
      bool ok = true;
      for (uint32_t id : ids) {
        if (id >= names.size()) {
          ok = false;
          break;
        }
        node = bb.child(node, bb.frame(names[id]));
      }
      if (ok)
        bb.add(node, static_cast<std::size_t>(col - metrics.begin()), static_cast<int64_t>(v));
    }
    for (auto& [bucket, b] : by_bucket) add(run, b);
  }
  exec(db, "DROP TABLE samples; DROP TABLE stacks; DROP TABLE frames; DROP TABLE metrics_v2;");
}

}  // namespace

bool migrate_schema(sqlite3* db, const std::string& path,
                    const std::function<void(int64_t, const Batch&)>& add) {
  int version = static_cast<int>(sql::pragma(db, "PRAGMA user_version"));
  const int latest = 6;
  if (version > latest)
    throw std::runtime_error("store: " + path + " has schema version " + std::to_string(version) +
                             ", newer than this server's " + std::to_string(latest));
  // From v3 on the file is incremental-vacuum already: v3 -> v4 needs no VACUUM.
  const bool converted = version > 0 && version < 3;
  for (int i = version; i < latest; ++i) {
    sql::Txn txn(db);
    if (i == 0) exec(db, kSchemaV1);
    if (i == 1) migrate_v2(db);
    if (i == 2) migrate_v3(db, add);
    if (i == 3) exec(db, kSchemaV4);
    if (i == 4) exec(db, kSchemaV5);
    if (i == 5) {
      exec(db, kSchemaV6);
      Stmt touch(db, "UPDATE runs SET touched_ns=? WHERE status='live'");
      touch
          .bind(1, std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count())
          .run();
    }
    exec(db, ("PRAGMA user_version=" + std::to_string(i + 1)).c_str());
    txn.commit();
  }
  return converted;
}

}  // namespace lfs

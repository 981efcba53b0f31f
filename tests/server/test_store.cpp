// SqliteStore: runs, interning, buckets, dedupe of chunks, limits,
// retention, and that a refused write leaves nothing.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>

#include "batch.hpp"
#include "store.hpp"

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/luaflame-store-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

lfs::NewRun upload_run(const std::string& name, lfs::Tags tags = {}) {
  lfs::NewRun r;
  r.name = name;
  r.tags = std::move(tags);
  r.started_ns = r.ended_ns = 1000000000000;
  r.metrics = {0};
  return r;
}

lfs::Batch batch(std::vector<std::pair<std::string, int64_t>> stacks, int64_t from_ns = 1000000000000) {
  lfs::Batch b;
  b.metrics = {0};
  b.from_ns = b.until_ns = from_ns;
  lfs::BatchBuilder bb(b);
  for (auto& [s, v] : stacks) bb.add(bb.path(s), 0, v);
  return b;
}

std::map<std::string, int64_t> read_all(lfs::Store& st, int64_t run, int metric = 0, int64_t from = INT64_MIN,
                                        int64_t until = INT64_MAX) {
  std::map<std::string, int64_t> out;
  lfs::StoredTree t;
  st.read_tree(run, metric, from, until, t);
  for (auto& [id, v] : t.values) out[lfs::path_text(t, id)] += v;
  return out;
}

lfs::RetainOptions retain_opts(int64_t older, int64_t keep, uint64_t budget) {
  lfs::RetainOptions o;
  o.now_ns = 1;
  o.older_than_ns = older;
  o.keep_runs = keep;
  o.budget_bytes = budget;
  o.trim = false;
  return o;
}

}  // namespace

TEST_CASE("an uploaded run reads back with totals and tags") {
  TempDir dir;
  auto st = lfs::open_sqlite_store(dir.path, {});
  int64_t id = st->create_run(upload_run("app", {{"branch", "main"}}),
                              batch({{"main;a", 3}, {"main;b", 2}, {"main;a", 1}}));
  auto run = st->get_run(id);
  REQUIRE(run);
  CHECK(run->name == "app");
  CHECK(run->status == "finished");
  CHECK(run->tags.at("branch") == "main");
  CHECK(run->totals.at(0) == 6);
  CHECK(run->stack_count == 2);
  auto stacks = read_all(*st, id);
  CHECK(stacks.size() == 2);
  CHECK(stacks["main;a"] == 4);
  CHECK(stacks["main;b"] == 2);
  CHECK_FALSE(st->get_run(id + 100));
}

TEST_CASE("data survives reopening, schema is versioned") {
  TempDir dir;
  int64_t id = 0;
  {
    auto st = lfs::open_sqlite_store(dir.path, {});
    id = st->create_run(upload_run("persist"), batch({{"x;y", 7}}));
    st->close();
  }
  auto st = lfs::open_sqlite_store(dir.path, {});
  CHECK(read_all(*st, id)["x;y"] == 7);
}

TEST_CASE("streams: create is idempotent, seq dedupes, finish refuses more") {
  TempDir dir;
  auto st = lfs::open_sqlite_store(dir.path, {});
  lfs::NewRun r = upload_run("svc");
  r.stream = "stream:abc";
  r.finished = false;
  r.source = "stream";
  bool created = false;
  int64_t id = st->open_stream(r, created);
  CHECK(created);
  CHECK(st->open_stream(r, created) == id);
  CHECK_FALSE(created);
  CHECK(st->append(id, 0, batch({{"m;f", 1}}, 10'000'000'000)) == lfs::AppendStatus::ok);
  CHECK(st->append(id, 0, batch({{"m;f", 1}}, 10'000'000'000)) == lfs::AppendStatus::duplicate);
  CHECK(st->append(id, 1, batch({{"m;f", 2}, {"m;g", 5}}, 12'500'000'000)) == lfs::AppendStatus::ok);
  CHECK(st->get_run(id)->status == "live");
  auto all = read_all(*st, id);
  CHECK(all["m;f"] == 3);
  CHECK(all["m;g"] == 5);
  CHECK(st->get_run(id)->stack_count == 2);  // interned once across chunks
  // time window: only the second chunk's bucket
  auto part = read_all(*st, id, 0, 12'000'000'000, 13'000'000'000);
  CHECK(part["m;f"] == 2);
  CHECK(part.count("m;g") == 1);
  auto tl = st->timeline(id, 0, 0, INT64_MAX, 0);
  REQUIRE(tl.size() == 2);
  CHECK(tl[0].t_ns == 10'000'000'000);
  CHECK(tl[0].value == 1);
  CHECK(tl[1].t_ns == 12'000'000'000);
  CHECK(tl[1].value == 7);
  CHECK(st->finish(id, "{\"x\":1}", 20'000'000'000));
  CHECK(st->append(id, 2, batch({{"m;f", 1}})) == lfs::AppendStatus::finished);
  CHECK(st->append(id + 50, 0, batch({{"m;f", 1}})) == lfs::AppendStatus::not_found);
  CHECK(st->get_run(id)->stats_json == "{\"x\":1}");
}

TEST_CASE("over the distinct-stack limit nothing is stored") {
  TempDir dir;
  lfs::StoreOptions o;
  o.max_stacks = 2;
  auto st = lfs::open_sqlite_store(dir.path, o);
  CHECK_THROWS_AS(st->create_run(upload_run("big"), batch({{"a", 1}, {"b", 1}, {"c", 1}})), lfs::LimitError);
  CHECK(st->list_runs({}).total == 0);
  lfs::NewRun r = upload_run("s");
  r.stream = "k";
  r.finished = false;
  bool created = false;
  int64_t id = st->open_stream(r, created);
  CHECK(st->append(id, 0, batch({{"a", 1}, {"b", 1}})) == lfs::AppendStatus::ok);
  CHECK_THROWS_AS(st->append(id, 1, batch({{"c", 1}})), lfs::LimitError);
  // the refused chunk left no trace, not even its seq
  CHECK(st->append(id, 1, batch({{"a", 1}})) == lfs::AppendStatus::ok);
  CHECK(read_all(*st, id).size() == 2);
}

TEST_CASE("list filters by name and tags, newest first, paged; latest_run picks a base") {
  TempDir dir;
  auto st = lfs::open_sqlite_store(dir.path, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(st->create_run(upload_run(i % 2 ? "odd" : "even", {{"branch", i < 3 ? "main" : "dev"}}),
                                 batch({{"s", 1 + i}})));
  auto all = st->list_runs({});
  CHECK(all.total == 5);
  REQUIRE(all.runs.size() == 5);
  CHECK(all.runs[0].id == ids[4]);
  lfs::RunFilter f;
  f.name = "even";
  f.tags = {{"branch", "main"}};
  auto some = st->list_runs(f);
  CHECK(some.total == 2);  // runs 0 and 2
  f = {};
  f.limit = 2;
  f.offset = 2;
  auto page = st->list_runs(f);
  REQUIRE(page.runs.size() == 2);
  CHECK(page.runs[0].id == ids[2]);
  CHECK(st->latest_run("even", {{"branch", "main"}}, 0) == ids[2]);
  CHECK(st->latest_run("even", {{"branch", "main"}}, ids[2]) == ids[0]);
  CHECK_FALSE(st->latest_run("even", {{"branch", "nope"}}, 0));
}

TEST_CASE("delete and retention") {
  TempDir dir;
  auto st = lfs::open_sqlite_store(dir.path, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    lfs::NewRun r = upload_run("r");
    r.ended_ns = r.started_ns = 1000000000LL * (i + 1);
    std::vector<std::pair<std::string, int64_t>> stacks;
    for (int k = 0; k < 200; ++k) stacks.push_back({"main;fn" + std::to_string(k) + std::string(200, 'x'), 1});
    ids.push_back(st->create_run(r, batch(stacks, r.started_ns)));
  }
  CHECK(st->delete_run(ids[0]));
  CHECK_FALSE(st->delete_run(ids[0]));
  CHECK(read_all(*st, ids[0]).empty());
  auto gone = st->retain(retain_opts(2500000000LL, 0, 0)).deleted;  // ended before 2.5 s: run 1
  CHECK(gone == std::vector<int64_t>{ids[1]});
  gone = st->retain(retain_opts(0, 3, 0)).deleted;  // keep newest 3
  CHECK(gone == std::vector<int64_t>{ids[2]});
  CHECK(st->list_runs({}).total == 3);
  int64_t used = st->stats().stored_bytes;
  gone = st->retain(retain_opts(0, 0, static_cast<uint64_t>(used - 1))).deleted;  // just under: drop the oldest
  CHECK(gone.size() >= 1);
  CHECK(gone[0] == ids[3]);
  CHECK(st->stats().stored_bytes < used);
}

TEST_CASE("readers are not blocked while a writer works") {
  TempDir dir;
  auto st = lfs::open_sqlite_store(dir.path, {});
  int64_t id = st->create_run(upload_run("r"), batch({{"a", 1}}));
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::vector<std::pair<std::string, int64_t>> stacks;
    for (int k = 0; k < 100000; ++k) stacks.push_back({"main;f" + std::to_string(k), 1});
    st->create_run(upload_run("big"), batch(stacks));
    done = true;
  });
  int reads = 0;
  while (!done) {
    CHECK(read_all(*st, id)["a"] == 1);
    ++reads;
  }
  writer.join();
  MESSAGE("reads during one big write: " << reads);
  CHECK(reads > 1);
}

TEST_CASE("a version-1 store (stack text) migrates to frame ids and reads back") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path + "/luaflame.db").c_str(), &db) == SQLITE_OK);
    const char* v1 = R"(
      CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, source TEXT NOT NULL,
        status TEXT NOT NULL, stream TEXT UNIQUE, started_ns INTEGER NOT NULL, ended_ns INTEGER NOT NULL,
        created_ns INTEGER NOT NULL, hz REAL NOT NULL DEFAULT 0, stats TEXT, stack_count INTEGER NOT NULL DEFAULT 0);
      CREATE INDEX runs_name ON runs(name, id);
      CREATE TABLE tags(run INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(run, key)) WITHOUT ROWID;
      CREATE INDEX tags_kv ON tags(key, value, run);
      CREATE TABLE metrics(run INTEGER NOT NULL, metric INTEGER NOT NULL, total REAL NOT NULL DEFAULT 0,
        PRIMARY KEY(run, metric)) WITHOUT ROWID;
      CREATE TABLE stacks(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, hash INTEGER NOT NULL, text TEXT NOT NULL);
      CREATE INDEX stacks_hash ON stacks(run, hash);
      CREATE TABLE samples(run INTEGER NOT NULL, metric INTEGER NOT NULL, bucket INTEGER NOT NULL,
        stack INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY(run, metric, bucket, stack)) WITHOUT ROWID;
      CREATE TABLE chunks(run INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(run, seq)) WITHOUT ROWID;
      INSERT INTO runs VALUES(1, 'old', 'upload', 'finished', NULL, 5, 5, 5, 0, NULL, 2);
      INSERT INTO metrics VALUES(1, 0, 7);
      INSERT INTO stacks VALUES(10, 1, 0, 'main;a'), (11, 1, 0, 'main;b;a');
      INSERT INTO samples VALUES(1, 0, 0, 10, 3), (1, 0, 0, 11, 4);
      PRAGMA user_version=1;)";
    REQUIRE(sqlite3_exec(db, v1, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto st = lfs::open_sqlite_store(dir.path, {});
  auto all = read_all(*st, 1);
  CHECK(all.size() == 2);
  CHECK(all["main;a"] == 3);
  CHECK(all["main;b;a"] == 4);
  // appends after the migration find the migrated stacks and frames
  lfs::NewRun r = upload_run("new");
  r.stream = "s";
  r.finished = false;
  bool created = false;
  int64_t id = st->open_stream(r, created);
  CHECK(st->append(id, 0, batch({{"main;a", 1}})) == lfs::AppendStatus::ok);
  CHECK(read_all(*st, id)["main;a"] == 1);
}

// The Store contract, run against SQLite (test_server_store) and PostgreSQL
// (test_server_store_pg, store_backend.hpp): runs, interning, buckets, dedupe
// of chunks, limits, retention, and that a refused write leaves nothing.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "store/batch.hpp"
#include "store/postgres/pg_client.hpp"
#include "store/store.hpp"
#include "store_backend.hpp"

namespace {

lfs::NewRun upload_run(const std::string& name, lfs::Tags tags = {}) {
  lfs::NewRun r;
  r.name = name;
  r.tags = std::move(tags);
  r.started_ns = r.ended_ns = 1000000000000;
  r.metrics = {0};
  return r;
}

lfs::Batch batch(std::vector<std::pair<std::string, int64_t>> stacks,
                 int64_t from_ns = 1000000000000) {
  lfs::Batch b;
  b.metrics = {0};
  b.from_ns = b.until_ns = from_ns;
  lfs::BatchBuilder bb(b);
  for (auto& [s, v] : stacks) bb.add(bb.path(s), 0, v);
  return b;
}

std::map<std::string, int64_t> read_all(lfs::Store& st, int64_t run, int metric = 0,
                                        int64_t from = INT64_MIN, int64_t until = INT64_MAX) {
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
  auto st = open_test_store(dir, {});
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
    auto st = open_test_store(dir, {});
    id = st->create_run(upload_run("persist"), batch({{"x;y", 7}}));
    st->close();
  }
  auto st = open_test_store(dir, {});
  CHECK(read_all(*st, id)["x;y"] == 7);
}

TEST_CASE("streams: create is idempotent, seq dedupes, finish refuses more") {
  TempDir dir;
  auto st = open_test_store(dir, {});
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
  CHECK(st->append(id, 1, batch({{"m;f", 2}, {"m;g", 5}}, 12'500'000'000)) ==
        lfs::AppendStatus::ok);
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
  auto st = open_test_store(dir, o);
  CHECK_THROWS_AS(st->create_run(upload_run("big"), batch({{"a", 1}, {"b", 1}, {"c", 1}})),
                  lfs::LimitError);
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

TEST_CASE("list filters by name and tags, newest first, paged, latest_run picks a base") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(
        st->create_run(upload_run(i % 2 ? "odd" : "even", {{"branch", i < 3 ? "main" : "dev"}}),
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
  auto st = open_test_store(dir, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    lfs::NewRun r = upload_run("r");
    r.ended_ns = r.started_ns = 1000000000LL * (i + 1);
    std::vector<std::pair<std::string, int64_t>> stacks;
    for (int k = 0; k < 200; ++k)
      stacks.push_back({"main;fn" + std::to_string(k) + std::string(200, 'x'), 1});
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
  gone = st->retain(retain_opts(0, 0, static_cast<uint64_t>(used - 1)))
             .deleted;  // just under: drop the oldest
  CHECK(gone.size() >= 1);
  CHECK(gone[0] == ids[3]);
  CHECK(st->stats().stored_bytes < used);
}

TEST_CASE("readers are not blocked while a writer works") {
  TempDir dir;
  auto st = open_test_store(dir, {});
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

TEST_CASE("a version-1 store (stack text) migrates to frame ids and reads back" *
          doctest::skip(kPg)) {
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
  auto st = open_test_store(dir, {});
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

namespace {

lfs::NewRun stream_run(const std::string& key) {
  lfs::NewRun r = upload_run("svc");
  r.stream = key;
  r.finished = false;
  r.source = "stream";
  return r;
}

constexpr int64_t kS = 1000000000LL;

}  // namespace

TEST_CASE(
    "regression: the WAL stays bounded while thousands of chunks stream (checkpoints succeed)" *
    doctest::skip(kPg)) {
  TempDir dir;
  lfs::StoreOptions fast;
  fast.sync_full = false;  // the WAL's growth does not depend on fsync; the test's time does
  auto st = open_test_store(dir, fast);
  bool created = false;
  int64_t id = st->open_stream(stream_run("wal"), created);
  std::vector<std::pair<std::string, int64_t>> stacks;
  for (int k = 0; k < 100; ++k)
    stacks.push_back({"main;handler" + std::to_string(k % 10) + ";fn" + std::to_string(k), 1 + k});
  const std::string wal = dir.path + "/luaflame.db-wal";
  uintmax_t biggest = 0;
  for (int seq = 0; seq < 3000; ++seq) {
    REQUIRE(st->append(id, seq, batch(stacks, 1700000000 * kS + seq * 10 * kS)) ==
            lfs::AppendStatus::ok);
    std::error_code ec;
    biggest = std::max(biggest, std::filesystem::file_size(wal, ec));
  }
  MESSAGE("largest WAL over 3000 chunks: "
          << biggest << " bytes; database "
          << std::filesystem::file_size(dir.path + "/luaflame.db"));
  // Automatic checkpoints every 1000 pages (4 MB): a WAL that never checkpoints would pass
  // 30 MB here (each chunk rewrites several bucket blobs).
  CHECK(biggest < 16u << 20);
  CHECK(std::filesystem::file_size(dir.path + "/luaflame.db") >
        1u << 20);  // the data reached the main file
  CHECK(st->get_run(id)->totals.at(0) == 3000 * (100 * 101 / 2));
}

TEST_CASE("overflowing sums are refused whole: nothing stored, never a wrapped or float total") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  const int64_t big = INT64_MAX - 10;
  CHECK_THROWS_AS(st->create_run(upload_run("o"), batch({{"a", big}, {"b", 20}})), lfs::ValueError);
  CHECK(st->list_runs({}).total == 0);
  bool created = false;
  int64_t id = st->open_stream(stream_run("ov"), created);
  CHECK(st->append(id, 0, batch({{"a", big}})) == lfs::AppendStatus::ok);
  CHECK_THROWS_AS(st->append(id, 1, batch({{"b", 11}})), lfs::ValueError);  // run total overflows
  CHECK(st->append(id, 1, batch({{"b", 10}})) == lfs::AppendStatus::ok);    // seq 1 was not kept
  auto run = st->get_run(id);
  CHECK(run->totals.at(0) == INT64_MAX);
  auto all = read_all(*st, id);
  CHECK(all["a"] == big);
  CHECK(all["b"] == 10);
  lfs::Batch neg = batch({{"a", 1}});
  neg.values[0] = -1;
  CHECK_THROWS_AS(st->append(id, 2, neg), lfs::ValueError);
}

TEST_CASE("ranges read the coarsest buckets that fit and equal the sum of their chunks") {
  TempDir dir;
  lfs::StoreOptions fast;
  fast.sync_full = false;
  auto st = open_test_store(dir, fast);
  bool created = false;
  int64_t id = st->open_stream(stream_run("ranges"), created);
  // 2 days of 10 s chunks, every 7th chunk only: stack k%5 gets the chunk index.
  const int64_t t0 =
      1700000000 * kS / (3600 * kS) * (3600 * kS) - 200 * kS;  // 200 s before an hour
  std::map<int64_t, std::pair<std::string, int64_t>> by_time;
  for (int i = 0, seq = 0; i < 2 * 8640; i += 7, ++seq) {
    std::string s = "main;f" + std::to_string(i % 5);
    by_time[t0 + i * 10 * kS] = {s, i + 1};
    REQUIRE(st->append(id, seq, batch({{s, i + 1}}, t0 + i * 10 * kS)) == lfs::AppendStatus::ok);
  }
  std::vector<std::pair<int64_t, int64_t>> ranges = {{t0, t0 + 2 * 86400 * kS},
                                                     {t0 + 200 * kS, t0 + 200 * kS + 86400 * kS},
                                                     {t0 + 3601 * kS, t0 + 7 * 3600 * kS + 17 * kS},
                                                     {t0 - 5 * kS, t0 + 95 * kS},
                                                     {t0 + 86399 * kS, t0 + 86411 * kS},
                                                     {t0 + 123 * kS, t0 + 124 * kS}};
  for (const auto& range : ranges) {
    // Plain variables, not a structured binding: clang 14 (clang-tidy) cannot
    // capture a binding in CAPTURE's lambda.
    const int64_t from = range.first, until = range.second;
    CAPTURE(from - t0);
    CAPTURE(until - t0);
    std::map<std::string, int64_t> want;
    for (auto it = by_time.lower_bound(from); it != by_time.end() && it->first < until; ++it)
      want[it->second.first] += it->second.second;
    CHECK(read_all(*st, id, 0, from, until) == want);
    int64_t sum = 0;
    for (const auto& p : st->timeline(id, 0, from, until, 600 * kS)) {
      CHECK(p.width_ns == 600 * kS);
      sum += p.value;
    }
    int64_t want_sum = 0;
    for (auto& [s, v] : want) want_sum += v;
    if (from % (600 * kS) == 0 && until % (600 * kS) == 0) CHECK(sum == want_sum);
  }
  std::map<std::string, int64_t> whole;
  for (auto& [t, sv] : by_time) whole[sv.first] += sv.second;
  CHECK(read_all(*st, id) == whole);
}

TEST_CASE("per-resolution retention trims live runs, keeps totals consistent, gives space back") {
  TempDir dir;
  lfs::StoreOptions o;
  o.sync_full = false;
  REQUIRE(lfs::parse_resolutions("10s:1h,1m:6h,1h:1d", o.resolutions) == "");
  auto st = open_test_store(dir, o);
  bool created = false;
  int64_t id = st->open_stream(stream_run("trim"), created);
  const int64_t t0 = 1700000000 * kS / (3600 * kS) * (3600 * kS);
  std::string pad(300, 'x');
  // 2 days of 10 s chunks of 200 stacks, one in 6 sent (the test's time)
  for (int i = 0; i < 2 * 8640; i += 6) {
    std::vector<std::pair<std::string, int64_t>> stacks;
    for (int k = 0; k < 200; ++k)
      stacks.push_back({"main;f" + std::to_string((i + k) % 400) + pad, 1});
    REQUIRE(st->append(id, i, batch(stacks, t0 + i * 10 * kS)) == lfs::AppendStatus::ok);
  }
  const int64_t end = t0 + 2 * 86400 * kS;
  CHECK(st->get_run(id)->totals.at(0) == 2 * 1440 * 200);
  auto before = st->stats();
  const int64_t revision = st->get_run(id)->revision;
  lfs::RetainOptions ro;
  ro.now_ns = end;
  lfs::RetainResult rr = st->retain(ro);
  auto after = st->stats();
  MESSAGE("trimmed " << rr.buckets_trimmed << " buckets, freed " << rr.bytes_freed
                     << " bytes; file " << before.file_bytes << " -> " << after.file_bytes);
  CHECK(rr.deleted.empty());
  CHECK(rr.trimmed == std::vector<int64_t>{id});
  CHECK(rr.buckets_trimmed > 0);
  CHECK(rr.bytes_freed > 0);
  CHECK(after.stored_bytes < before.stored_bytes);
  CHECK(st->get_run(id)->revision > revision);  // cached views of the run are stale
  if (!kPg)
    CHECK(std::filesystem::file_size(dir.path + "/luaflame.db") <
          static_cast<uintmax_t>(before.file_bytes));
  // The coarsest resolution keeps a day (+ its bucket): the run now holds its last 25 hours at
  // most.
  const int64_t total = st->get_run(id)->totals.at(0);
  CHECK(total < 2 * 1440 * 200);
  CHECK(total >= 1440 * 200);
  int64_t whole = 0;
  for (auto& [s, v] : read_all(*st, id)) whole += v;
  CHECK(whole == total);  // the merged tree lost what the coarsest buckets lost
  // The last hour still reads at 10 s resolution; two days ago is gone.
  auto tl = st->timeline(id, 0, end - 3600 * kS, end, 10 * kS);
  REQUIRE(tl.size() == 60);
  CHECK(tl.back().width_ns == 10 * kS);
  CHECK(tl.back().value == 200);
  // Six hours ago: 10 s buckets are gone, the timeline falls back on 1 min ones.
  auto older = st->timeline(id, 0, end - 5 * 3600 * kS, end - 4 * 3600 * kS, 10 * kS);
  REQUIRE(!older.empty());
  CHECK(older.front().width_ns == 60 * kS);
  CHECK(st->timeline(id, 0, t0, t0 + 3600 * kS, 10 * kS).empty());
  // the run still takes chunks
  CHECK(st->append(id, 99999, batch({{"main;new", 5}}, end)) == lfs::AppendStatus::ok);
}

TEST_CASE("listing pages by cursor, totals from counters or counted up to a cap") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 25; ++i)
    ids.push_back(st->create_run(upload_run(i % 2 ? "odd" : "even", {{"n", std::to_string(i % 3)}}),
                                 batch({{"s", 1}})));
  bool created = false;
  st->open_stream(stream_run("live1"), created);
  lfs::RunFilter f;
  f.limit = 10;
  std::vector<int64_t> seen;
  for (int page = 0; page < 10; ++page) {
    lfs::RunList l = st->list_runs(f);
    CHECK(l.total == 26);
    CHECK(l.total_exact);
    for (auto& r : l.runs) seen.push_back(r.id);
    if (!l.next_cursor) break;
    f.before_id = l.next_cursor;
  }
  CHECK(seen.size() == 26);
  CHECK(std::is_sorted(seen.rbegin(), seen.rend()));
  lfs::RunFilter live;
  live.status = "live";
  CHECK(st->list_runs(live).total == 1);
  live.status = "finished";
  CHECK(st->list_runs(live).total == 25);
  lfs::RunFilter odd;
  odd.name = "odd";
  odd.tags = {{"n", "1"}};
  lfs::RunList l = st->list_runs(odd);
  int want = 0;
  for (int i = 0; i < 25; ++i) want += i % 2 == 1 && i % 3 == 1;
  CHECK(l.total == want);
  CHECK(static_cast<int>(l.runs.size()) == want);
  CHECK(l.next_cursor == 0);
}

// name + tag listings walked one condition's index and looked the other up run by run (30 to
// 48 ms at 1M runs); they now read tags_kvn. Every filter's pages and total against a scan.
TEST_CASE("every filter's pages and total match a scan of the runs (name, status, tags, cursor)") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  struct Row {
    int64_t id;
    std::string name, status;
    lfs::Tags tags;
  };
  std::vector<Row> rows;
  for (int i = 0; i < 60; ++i) {
    lfs::Tags tags = {{"branch", i % 2 ? "main" : "dev"}, {"host", "h" + std::to_string(i % 5)}};
    const std::string name = std::string(1, static_cast<char>('a' + i % 3));
    if (i % 7 == 3) {
      lfs::NewRun r = stream_run("s" + std::to_string(i));
      r.name = name;
      r.tags = tags;
      bool created = false;
      rows.push_back({st->open_stream(r, created), name, "live", tags});
    } else {
      rows.push_back(
          {st->create_run(upload_run(name, tags), batch({{"s", 1}})), name, "finished", tags});
    }
  }
  for (const char* name : {"", "a"})
    for (const char* status : {"", "live", "finished"})
      for (const lfs::Tags& tags : std::vector<lfs::Tags>{{},
                                                          {{"branch", "main"}},
                                                          {{"host", "h1"}},
                                                          {{"branch", "main"}, {"host", "h1"}},
                                                          {{"branch", "nope"}}}) {
        lfs::RunFilter f;
        f.name = name;
        f.status = status;
        f.tags = tags;
        f.limit = 4;
        std::vector<int64_t> want, got;
        for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
          bool ok = (f.name.empty() || it->name == f.name) &&
                    (f.status.empty() || it->status == f.status);
          for (const auto& [k, v] : tags) ok = ok && it->tags.at(k) == v;
          if (ok) want.push_back(it->id);
        }
        CAPTURE(name);
        CAPTURE(status);
        CAPTURE(tags.size());
        CAPTURE(tags.empty() ? "" : tags.begin()->second);
        for (int page = 0; page < 30; ++page) {
          lfs::RunList l = st->list_runs(f);
          if (page == 0) {
            CHECK(l.total == static_cast<int64_t>(want.size()));
            CHECK(l.total_exact);
          }
          for (const lfs::RunInfo& r : l.runs) got.push_back(r.id);
          if (!l.next_cursor) break;
          f.before_id = l.next_cursor;
        }
        CHECK(got == want);
      }
}

TEST_CASE("an upload keeps its finest bucket only, and every range and timeline still finds it") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  const int64_t t = 1700000123 * kS;
  int64_t id = st->create_run(upload_run("u"), batch({{"main;a", 5}, {"main;b", 7}}, t));
  CHECK(read_all(*st, id, 0, t - 86400 * kS, t + 86400 * kS) ==
        std::map<std::string, int64_t>{{"main;a", 5}, {"main;b", 7}});
  CHECK(read_all(*st, id, 0, t + kS, t + 86400 * kS).empty());
  auto tl = st->timeline(id, 0, t - 3600 * kS, t + 3600 * kS, 600 * kS);
  REQUIRE(tl.size() == 1);
  CHECK(tl[0].value == 12);
  CHECK(tl[0].t_ns == t);
}

// Issue 17's source view had no PostgreSQL backend: `--store postgresql://` servers could not
// ship sources. One contract for both: bytes kept as sent, replace by path, list in bytewise
// path order, drop one run only, and a second opener (another server) sees the files.
TEST_CASE("source texts: put, replace, list, get, drop, seen by a second opener") {
  TempDir dir;
  const std::string binary("x\0y\xff\xfe", 5);      // NUL and bytes that are not UTF-8
  const std::string odd_path("lib/\xe9t\xe9.lua");  // Latin-1 bytes in a path
  {
    auto s = open_test_sources(dir);
    REQUIRE(s);
    s->put_sources(1, {{"b.lua", "print(1)\n"}, {"a.lua", binary}, {odd_path, ""}});
    s->put_sources(2, {{"a.lua", "other"}});
    s->put_sources(1, {{"b.lua", "first"}, {"b.lua", "print(2)\n"}});  // the last one wins
    s->put_sources(3, {});
    CHECK(s->get_source(1, "b.lua") == std::optional<std::string>("print(2)\n"));
    CHECK(s->get_source(1, "a.lua") == std::optional<std::string>(binary));
    CHECK(s->get_source(1, odd_path) == std::optional<std::string>(""));
    CHECK_FALSE(s->get_source(1, "c.lua"));
    CHECK_FALSE(s->get_source(3, "a.lua"));
    CHECK(s->list_sources(1) ==
          std::vector<std::pair<std::string, int64_t>>{{"a.lua", 5}, {"b.lua", 9}, {odd_path, 0}});
    CHECK(s->list_sources(3).empty());
    auto other = open_test_sources(dir);  // a second server on the same store
    CHECK(other->get_source(2, "a.lua") == std::optional<std::string>("other"));
    other->drop_sources(1);
    CHECK(s->list_sources(1).empty());
    CHECK_FALSE(s->get_source(1, "b.lua"));
  }
  auto again = open_test_sources(dir);  // reopened: run 2's file is still there
  CHECK(again->get_source(2, "a.lua") == std::optional<std::string>("other"));
  CHECK(again->list_sources(2) == std::vector<std::pair<std::string, int64_t>>{{"a.lua", 5}});
}

// Tag rows carry their run's name since SQLite schema 4 / PostgreSQL schema 2: a store from
// before gets the names at upgrade, or name + tag listings would miss its runs.
TEST_CASE("an older store gets its tag rows' names at upgrade: name + tag still finds its runs") {
  TempDir dir;
  int64_t id = 0, live = 0;
  {
    auto st = open_test_store(dir, {});
    id = st->create_run(upload_run("svc", {{"branch", "main"}}), batch({{"s", 1}}));
    st->create_run(upload_run("other", {{"branch", "main"}}), batch({{"s", 1}}));
    lfs::NewRun r = upload_run("streaming");
    r.stream = "older-live";
    r.finished = false;
    bool created = false;
    live = st->open_stream(r, created);
    st->close();
  }
  if (kPg) {
    lfs::pg::Conn c(dir.spec);
    c.exec(
        "DROP TRIGGER runs_status ON runs; DROP TRIGGER tags_status ON tags;"
        " DROP FUNCTION runs_give_status(); DROP FUNCTION tags_take_status();"
        " DROP INDEX tags_kvs; ALTER TABLE tags DROP COLUMN status;"
        " ALTER TABLE runs DROP COLUMN touched_ns;"
        " DROP INDEX tags_kvn; DROP INDEX runs_name_status; ALTER TABLE tags DROP COLUMN name;"
        " ALTER TABLE buckets DROP CONSTRAINT buckets_pkey; ALTER TABLE buckets DROP COLUMN part;"
        " DROP SEQUENCE bucket_parts; ALTER TABLE buckets ADD PRIMARY KEY(run, metric, width,"
        " bucket); UPDATE luaflame_meta SET value=1 WHERE key='schema'");
  } else {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path + "/luaflame.db").c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "DROP INDEX tags_kvn; ALTER TABLE tags DROP COLUMN name;"
                       " ALTER TABLE runs DROP COLUMN touched_ns;"
                       " DROP INDEX buckets_key; CREATE UNIQUE INDEX buckets_key ON"
                       " buckets(run, metric, width, bucket); PRAGMA user_version=3",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto st = open_test_store(dir, {});
  lfs::RunFilter f;
  f.name = "svc";
  f.tags = {{"branch", "main"}};
  lfs::RunList l = st->list_runs(f);
  REQUIRE(l.runs.size() == 1);
  CHECK(l.runs[0].id == id);
  CHECK(l.total == 1);
  const int64_t later = st->create_run(upload_run("svc", {{"branch", "main"}}), batch({{"s", 1}}));
  l = st->list_runs(f);
  REQUIRE(l.runs.size() == 2);
  CHECK(l.runs[0].id == later);
  CHECK(read_all(*st, id) == std::map<std::string, int64_t>{{"s", 1}});  // buckets upgraded too
  lfs::RunFilter done;  // PostgreSQL: tag rows get their run's status at upgrade (schema 4)
  done.status = "finished";
  done.tags = {{"branch", "main"}};
  CHECK(st->list_runs(done).total == 3);
  // A live run at the upgrade counts as touched then (its arrival times were not kept): not
  // idle a minute before, idle a minute after.
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(st->finish_idle(now - 60 * kS).empty());
  CHECK(st->finish_idle(now + 60 * kS) == std::vector<int64_t>{live});
}

// Idle is by when data arrived (touched_ns), never by the data's own times: a stream sending
// 1970's samples just now is busy, one that sent nothing since the cutoff is idle.
TEST_CASE("finish_idle finishes the live runs that got no data since a time, in one statement") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  auto stream = [&](const char* key) {
    lfs::NewRun r = upload_run("svc");
    r.stream = key;
    r.finished = false;
    r.started_ns = r.ended_ns = kS;  // 1970
    bool created = false;
    return st->open_stream(r, created);
  };
  auto clock = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t quiet = stream("quiet"), busy = stream("busy");
  const int64_t upload = st->create_run(upload_run("done"), batch({{"s", 1}}));
  CHECK(st->append(quiet, 0, batch({{"m;f", 1}}, 2 * kS)) == lfs::AppendStatus::ok);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t cutoff = clock();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(st->append(busy, 0, batch({{"m;f", 1}}, 2 * kS)) == lfs::AppendStatus::ok);
  CHECK(st->finish_idle(cutoff) == std::vector<int64_t>{quiet});
  CHECK(st->get_run(quiet)->status == "finished");
  CHECK(st->get_run(busy)->status == "live");
  CHECK(st->get_run(upload)->status == "finished");
  CHECK(st->append(quiet, 1, batch({{"m;f", 1}}, 3 * kS)) == lfs::AppendStatus::finished);
  CHECK(st->append(busy, 1, batch({{"m;f", 1}}, 3 * kS)) == lfs::AppendStatus::ok);
  CHECK(st->finish_idle(cutoff).empty());  // once
  CHECK(st->finish_idle(clock() + kS) == std::vector<int64_t>{busy});
}

// Issue 11: every chunk decoded and re-encoded its run's whole merged tree and coarse buckets
// (a streamed run's server time grew with the run). Buckets are now parts; this checks the
// policy's cost (bytes merged) stays about n log n for n equal parts that never overlap (the
// worst case: merged parts only grow), where merging every chunk into the bucket cost n^2 / 2.
TEST_CASE("appending a chunk merges about the chunk, not the bucket (parts_to_merge)") {
  for (int64_t n : {10, 100, 1000, 5000}) {
    CAPTURE(n);
    std::vector<int64_t> parts;
    int64_t merged_bytes = 0;
    std::size_t most_parts = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::size_t k = lfs::parts_to_merge(parts, 1);
      int64_t merged = 1;
      for (std::size_t j = 0; j < k; ++j) {
        merged += parts.back();
        parts.pop_back();
      }
      if (k > 0) merged_bytes += merged;
      parts.push_back(merged);
      most_parts = std::max(most_parts, parts.size());
    }
    int64_t log2n = 1;
    while ((int64_t{1} << log2n) < n) ++log2n;
    CHECK(most_parts <= lfs::kMaxParts);
    CHECK(merged_bytes <= 3 * n * log2n);
  }
}

// The same in the store: a growing live run streamed in many chunks that all land in the same
// coarse buckets reads back whole (merged tree, ranges, timeline), also after reopening, and
// each bucket stays a few parts (SQLite: rows per bucket key).
TEST_CASE("a live run's chunks appended as parts read back whole, before and after reopening") {
  TempDir dir;
  lfs::StoreOptions fast;
  fast.sync_full = false;
  int64_t id = 0;
  const int64_t t0 = 1700000000 * kS / (3600 * kS) * (3600 * kS);
  std::map<std::string, int64_t> want;
  {
    auto st = open_test_store(dir, fast);
    bool created = false;
    id = st->open_stream(stream_run("parts"), created);
    for (int i = 0; i < 400; ++i) {  // 400 chunks in 40 s: new stacks and repeated ones
      std::vector<std::pair<std::string, int64_t>> stacks;
      for (int k = 0; k < 20; ++k) {
        std::string s =
            "main;g" + std::to_string((i * 7 + k) % (i + 30)) + ";h" + std::to_string(k);
        stacks.push_back({s, i + k + 1});
        want[s] += i + k + 1;
      }
      REQUIRE(st->append(id, i, batch(stacks, t0 + i * kS / 10)) == lfs::AppendStatus::ok);
    }
    CHECK(read_all(*st, id) == want);
  }
  auto st = open_test_store(dir, fast);
  CHECK(read_all(*st, id) == want);
  CHECK(read_all(*st, id, 0, t0, t0 + 60 * kS) == want);
  int64_t sum = 0, tl = 0;
  for (auto& [s, v] : want) sum += v;
  for (const auto& p : st->timeline(id, 0, t0, t0 + 60 * kS, 60 * kS)) tl += p.value;
  CHECK(tl == sum);
  CHECK(st->get_run(id)->totals.at(0) == sum);
  if (!kPg) {
    st->close();
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path + "/luaflame.db").c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    REQUIRE(sqlite3_prepare_v2(db,
                               "SELECT COUNT(*) AS n FROM buckets GROUP BY run, metric, width, "
                               "bucket ORDER BY n DESC LIMIT 1",
                               -1, &q, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(q) == SQLITE_ROW);
    const int64_t most = sqlite3_column_int64(q, 0);
    CHECK(most >= 1);
    CHECK(most <= static_cast<int64_t>(lfs::kMaxParts));
    sqlite3_finalize(q);
    sqlite3_close(db);
  }
}

// PostgreSQL schema 4 copies a run's status into its tag rows (status + tag listings read one
// index): a stream that finishes must leave the live listing and join the finished one, by tag.
TEST_CASE("a finished stream moves from the live to the finished status + tag listing") {
  TempDir dir;
  auto st = open_test_store(dir, {});
  const int64_t done = st->create_run(upload_run("svc", {{"host", "h1"}}), batch({{"s", 1}}));
  lfs::NewRun r = stream_run("s1");
  r.tags = {{"host", "h1"}, {"branch", "main"}};
  bool created = false;
  const int64_t id = st->open_stream(r, created);
  auto ids = [&](const char* status, lfs::Tags tags) {
    lfs::RunFilter f;
    f.status = status;
    f.tags = std::move(tags);
    std::vector<int64_t> out;
    for (const lfs::RunInfo& info : st->list_runs(f).runs) out.push_back(info.id);
    return out;
  };
  CHECK(ids("live", {{"host", "h1"}}) == std::vector<int64_t>{id});
  CHECK(ids("finished", {{"host", "h1"}}) == std::vector<int64_t>{done});
  REQUIRE(st->finish(id, "", 20'000'000'000));
  CHECK(ids("live", {{"host", "h1"}}).empty());
  CHECK(ids("live", {{"branch", "main"}}).empty());
  CHECK(ids("finished", {{"host", "h1"}}) == std::vector<int64_t>{id, done});
  CHECK(ids("finished", {{"branch", "main"}}) == std::vector<int64_t>{id});
  lfs::RunFilter f;
  f.status = "finished";
  f.tags = {{"host", "h1"}};
  const lfs::RunList l = st->list_runs(f);
  CHECK(l.total == 2);
  CHECK(l.total_exact);
}

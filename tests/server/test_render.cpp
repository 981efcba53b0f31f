// Engine glue: trees from the store with focus/reverse/time windows, the
// tree cache, SVG options from query parameters, speedscope, diff reports.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "store/batch.hpp"
#include "views/cache.hpp"
#include "views/render.hpp"

namespace {

// A finished run of samples named `name`, its stacks at t = 5 s.
int64_t store_run(lfs::Store& store, const char* name,
                  const std::vector<std::pair<const char*, int64_t>>& stacks) {
  lfs::NewRun r;
  r.name = name;
  r.metrics = {0};
  lfs::Batch b;
  b.metrics = {0};
  b.from_ns = b.until_ns = 5000000000;
  lfs::BatchBuilder bb(b);
  for (const auto& [stack, value] : stacks) bb.add(bb.path(stack), 0, value);
  return store.create_run(r, b);
}

struct Fixture {
  std::string dir;
  std::unique_ptr<lfs::Store> store;
  int64_t run = 0;
  Fixture() {
    char tmpl[] = "/tmp/luaflame-render-XXXXXX";
    dir = mkdtemp(tmpl);
    store = lfs::open_sqlite_store(dir, {});
    run = store_run(*store, "app", {{"main;a;b", 10}, {"main;a;c", 5}, {"main;d", 3}});
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  lfs::RunInfo info() { return *store->get_run(run); }
};

std::string folded(const lf::Tree& t) {
  return lfs::run_folded(t);
}

}  // namespace

TEST_CASE("views: focus keeps the subtree, reverse flips stacks, windows select buckets") {
  Fixture f;
  lfs::View v;
  CHECK(folded(lfs::load_tree(*f.store, f.run, v)) == "main;a;b 10\nmain;a;c 5\nmain;d 3\n");
  v.focus = "main;a";
  lf::Tree focused = lfs::load_tree(*f.store, f.run, v);
  CHECK(focused.total() == 15);
  CHECK(folded(focused) == "main;a;b 10\nmain;a;c 5\n");
  v.focus = "main;zzz";
  CHECK(lfs::load_tree(*f.store, f.run, v).total() == 0);
  v.focus = "";
  v.reverse = true;
  CHECK(folded(lfs::load_tree(*f.store, f.run, v)) == "b;a;main 10\nc;a;main 5\nd;main 3\n");
  v.reverse = false;
  v.from_ns = 6000000000;
  CHECK(lfs::load_tree(*f.store, f.run, v).total() == 0);
  v.from_ns = 5000000000;
  v.until_ns = 5000000001;
  CHECK(lfs::load_tree(*f.store, f.run, v).total() == 18);
}

// Issue 27: luaflame's own hook time (in runs made with --show-profiler) is
// the profiler's cost: views leave it out unless profiler=1 asks for it.
TEST_CASE("views: luaflame's own hook frames are left out unless View::profiler") {
  Fixture f;
  const int64_t run = store_run(*f.store, "shown",
                                {{"main;a", 10},
                                 {"main;a;[luaflame] hook", 4},
                                 {"main;[luaflame] deeper frames cut (server --max-depth 8)", 2}});
  lfs::View v;
  CHECK(folded(lfs::load_tree(*f.store, run, v)) ==
        "main;[luaflame] deeper frames cut (server --max-depth 8) 2\nmain;a 10\n");
  v.profiler = true;
  CHECK(folded(lfs::load_tree(*f.store, run, v)) ==
        "main;[luaflame] deeper frames cut (server --max-depth 8) 2\nmain;a 10\n"
        "main;a;[luaflame] hook 4\n");
  v.reverse = true;
  v.profiler = false;
  CHECK(lfs::load_tree(*f.store, run, v).total() == 12);
  const std::string hidden = lfs::view_key(f.info(), v);
  v.profiler = true;
  CHECK(lfs::view_key(f.info(), v) != hidden);  // the tree cache keeps the two apart
}

TEST_CASE(
    "tree cache: views shared per revision (a live run's next chunk loads again), forget drops") {
  Fixture f;
  lfs::TreeCache cache(1000);
  lfs::RunInfo info = f.info();
  lfs::View v;
  auto a = cache.get(*f.store, info, v);
  CHECK(cache.get(*f.store, info, v) == a);
  lfs::View other = v;
  other.metric = 1;
  CHECK(cache.get(*f.store, info, other) != a);
  cache.forget(f.run);
  CHECK(cache.get(*f.store, info, v) != a);
  info.status = "live";
  auto l1 = cache.get(*f.store, info, v);
  CHECK(cache.get(*f.store, info, v) == l1);  // same revision: the same data
  info.revision += 1;                         // a chunk arrived
  auto l2 = cache.get(*f.store, info, v);
  CHECK(l2 != l1);
  CHECK(cache.get(*f.store, info, v) == l2);
  lfs::TreeCache tiny(4);  // too small to keep a 6-node tree
  auto t1 = tiny.get(*f.store, f.info(), v);
  CHECK(tiny.get(*f.store, f.info(), v) != t1);
}

// Regression: GET /api/runs/{id} and /functions walked the whole run at every
// request when its tree was too large for the tree cache (0.4 to 0.6 s each on
// a 200,000-stack run).
TEST_CASE("function tables of a run too large for the tree cache are computed once") {
  Fixture f;
  lfs::TreeCache tiny(4);  // keeps no tree of this run
  lfs::TableCache tables(1 << 20);
  lfs::View v;
  auto t1 = tables.get(tiny, *f.store, f.info(), v);
  CHECK(tables.get(tiny, *f.store, f.info(), v) == t1);  // not recomputed
  CHECK(tables.bytes() == t1->bytes());
  CHECK(t1->total == 18);
  REQUIRE(t1->functions.size() == 5);
  CHECK(t1->functions[0].name == "b");
  CHECK(t1->functions[0].self == 10);
  // The cached table answers what the tree would.
  lf::Tree tree = lfs::load_tree(*f.store, f.run, v);
  CHECK(lfs::top_functions(*t1, 3) == lfs::top_functions(tree, 3));
  CHECK(lfs::run_functions(*t1, 0, 2) == lfs::run_functions(tree, 0, 2));
  CHECK(lfs::top_functions(*t1, 3)["total"][0]["name"] == "main");
  lfs::View focused = v;
  focused.focus = "main;a";
  CHECK(tables.get(tiny, *f.store, f.info(), focused)->total == 15);
  tables.forget(f.run);
  CHECK(tables.bytes() == 0);
  CHECK(tables.get(tiny, *f.store, f.info(), v) != t1);
  lfs::RunInfo live = f.info();
  live.status = "live";  // kept per revision
  auto l1 = tables.get(tiny, *f.store, live, v);
  CHECK(tables.get(tiny, *f.store, live, v) == l1);
  const std::size_t one_revision = tables.bytes();
  live.revision += 1;
  CHECK(tables.get(tiny, *f.store, live, v) != l1);
  CHECK(tables.bytes() == one_revision);  // the older revision was dropped
  lfs::TableCache small(64);              // a table over a quarter of the budget is not kept
  auto s1 = small.get(tiny, *f.store, f.info(), v);
  CHECK(small.get(tiny, *f.store, f.info(), v) != s1);
  CHECK(small.bytes() == 0);
}

// Regression: the page asks for the details and the function table at once,
// and each request loaded the same large run.
TEST_CASE("flights: callers that arrive during a computation share it") {
  lfs::Flights<int> flights;
  std::atomic<int> made{0};
  std::atomic<bool> started{false}, release{false};
  auto slow = [&] {
    started = true;
    ++made;
    for (int i = 0; i < 500 && !release; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return std::make_shared<const int>(42);
  };
  std::shared_ptr<const int> a, b;
  std::thread first([&] { a = flights.run("k", slow); });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread second([&] { b = flights.run("k", slow); });
  std::this_thread::sleep_for(
      std::chrono::milliseconds(300));  // second is waiting on the first's flight
  release = true;
  first.join();
  second.join();
  CHECK(made == 1);
  REQUIRE(a);
  CHECK(a == b);
  // Failures reach the caller, and the key can be computed again afterwards.
  CHECK_THROWS_AS(
      flights.run("k", []() -> std::shared_ptr<const int> { throw std::runtime_error("x"); }),
      std::runtime_error);
  CHECK(*flights.run("k", [] { return std::make_shared<const int>(7); }) == 7);
  CHECK(made == 1);
}

TEST_CASE("svg options: flamegraph.pl names, metric defaults, 422 messages") {
  lf::SvgOptions o;
  bool reverse = false;
  CHECK(lfs::svg_options_from(
            {{"width", "800"}, {"minwidth", "1%"}, {"inverted", "1"}, {"colors", "hot"}},
            lfs::metric_index("samples"), o, reverse) == "");
  CHECK(o.width == 800);
  CHECK(o.min_width_percent);
  CHECK(o.min_width == 1);
  CHECK(o.inverted);
  CHECK(o.title == "Icicle Graph");
  CHECK(o.colors == "hot");
  lf::SvgOptions mem;
  CHECK(lfs::svg_options_from({}, lfs::metric_index("live_bytes"), mem, reverse) == "");
  CHECK(mem.unit == "bytes");
  CHECK(mem.colors == "mem");
  lf::SvgOptions time;
  CHECK(lfs::svg_options_from({}, lfs::metric_index("time"), time, reverse) == "");
  CHECK(time.unit == "ns");
  for (auto bad : std::vector<lfs::Params>{{{"width", "0"}},
                                           {{"colors", "x"}},
                                           {{"hash", "2"}},
                                           {{"minwidth", "-1"}},
                                           {{"fontsize", "abc"}},
                                           {{"factor", "0"}}}) {
    lf::SvgOptions b;
    CAPTURE(bad.begin()->first);
    CHECK(lfs::svg_options_from(bad, 0, b, reverse).find("bad value for " + bad.begin()->first) ==
          0);
  }
}

TEST_CASE("speedscope: frames indexed, weights sum to the total") {
  Fixture f;
  lf::Tree t = lfs::load_tree(*f.store, f.run, {});
  nlohmann::json s = lfs::run_speedscope(t, f.info(), 0);
  CHECK(s["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  const auto& p = s["profiles"][0];
  CHECK(p["type"] == "sampled");
  CHECK(p["endValue"] == 18);
  double sum = 0;
  for (const auto& w : p["weights"]) sum += w.get<double>();
  CHECK(sum == 18);
  CHECK(s["shared"]["frames"].size() == 5);  // main a b c d
  for (const auto& sample : p["samples"])
    CHECK(s["shared"]["frames"][sample[0].get<std::size_t>()]["name"] == "main");
}

TEST_CASE("diff report: self shares, threshold, markdown") {
  auto tree = [](std::vector<std::pair<std::string, double>> stacks) {
    lf::Tree t;
    for (auto& [s, v] : stacks) t.add(s, v);
    t.finalize();
    return t;
  };
  lf::Tree base = tree({{"main;fast", 90}, {"main;slow", 10}});
  lf::Tree head = tree({{"main;fast", 50}, {"main;slow", 50}});
  lfs::RunInfo b, h;
  b.id = 1;
  h.id = 2;
  b.name = h.name = "app|pipe";
  auto ok = lfs::diff_report(base, head, b, h, 0, 50, 10);
  CHECK_FALSE(ok.failed);
  CHECK(ok.json["regressions"][0]["name"] == "slow");
  CHECK(ok.json["regressions"][0]["delta_pct"] == 40);
  CHECK(ok.json["improvements"][0]["name"] == "fast");
  CHECK(ok.json["markdown"].get<std::string>().find("app\\|pipe") !=
        std::string::npos);  // table-safe
  auto fail = lfs::diff_report(base, head, b, h, 0, 39.5, 10);
  CHECK(fail.failed);
  CHECK(fail.json["markdown"].get<std::string>().find("**FAILED**: slow") != std::string::npos);
  auto none = lfs::diff_report(base, head, b, h, 0, -1, 10);
  CHECK_FALSE(none.failed);
  CHECK(none.json["threshold"].is_null());
}

// Regression: comparisons are cached under both runs; deleting either must drop them.
TEST_CASE("svg cache: a comparison is forgotten with either of its runs") {
  lfs::SvgCache cache(1 << 20);
  auto body = std::make_shared<lfs::Payload>();
  body->raw = "<svg/>";
  for (int64_t deleted : {3, 4}) {
    CAPTURE(deleted);
    cache.put(4, "diff|3|4", body, 3);
    cache.put(5, "graph|5", body);
    REQUIRE(cache.get("diff|3|4") == body);
    cache.forget(deleted);
    CHECK(cache.get("diff|3|4") == nullptr);
    CHECK(cache.get("graph|5") == body);
    CHECK(cache.bytes() == body->size());
  }
}

namespace {
std::size_t string_cost(const std::string& s) {
  return s.size();
}
}  // namespace

TEST_CASE("RunLru, the server's one cache: recency, the cost bound, forgetting a run") {
  lfs::RunLru<std::string, string_cost> lru(100, 4);  // entries of at most 25
  auto v = [](std::size_t n) { return std::make_shared<const std::string>(n, 'x'); };
  lru.put(1, "a", v(20));
  lru.put(2, "b", v(20));
  lru.put(3, "c", v(26));  // over a quarter of the budget: not kept
  CHECK(lru.get("c") == nullptr);
  CHECK(lru.cost() == 40);
  REQUIRE(lru.get("a") != nullptr);  // a is now the most recent
  lru.put(4, "d", v(25));
  lru.put(5, "e", v(25));
  lru.put(7, "f", v(25));  // 115 > 100: the least recent (b) goes
  CHECK(lru.get("b") == nullptr);
  CHECK(lru.get("a") != nullptr);
  CHECK(lru.cost() == 95);
  lru.put(6, "cmp", v(5), 1);  // a comparison of runs 6 and 1
  lru.put(4, "d", v(10));      // the same key again replaces it
  CHECK(lru.cost() == 20 + 25 + 25 + 10 + 5);
  lru.forget(1);  // drops a and the comparison
  CHECK(lru.get("a") == nullptr);
  CHECK(lru.get("cmp") == nullptr);
  CHECK(lru.cost() == 60);
  CHECK(lru.hits() == 2);
  CHECK(lru.misses() == 4);
}

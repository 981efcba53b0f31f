// pprof bodies -> store batches (server/ingest/pprof_ingest.hpp). Bodies are written
// with the engine's write_pprof; go tool pprof and real agents are in pprof/.
#include "ingest/pprof_ingest.hpp"

#include <doctest/doctest.h>

#include <map>

#include "http/app.hpp"
#include "protowire.hpp"

namespace {

lf::Tree tree_of(const std::string& folded) {
  lf::Tree t;
  lf::parse_folded(folded, lf::ParseOptions{}, [&](const lf::FoldedLine& l) { t.add(l); });
  t.finalize();
  return t;
}

lf::ParseOptions strict() {
  lf::ParseOptions o;
  o.strict = true;
  return o;
}

// metric name -> stack -> value (the batch's tree read back as folded stacks)
std::map<std::string, std::map<std::string, double>> columns(const lfs::Batch& b) {
  std::map<std::string, std::map<std::string, double>> m;
  std::vector<std::string> path(b.nodes.size());
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    const auto& n = b.nodes[i];
    path[i] =
        (n.parent < 0 ? "" : path[static_cast<std::size_t>(n.parent)] + ";") + b.frames[n.frame];
    bool any = false;
    for (std::size_t c = 0; c < b.metrics.size(); ++c) any = any || b.value(i, c) != 0;
    if (!any) continue;
    for (std::size_t c = 0; c < b.metrics.size(); ++c)
      m[std::string(lfs::metric_name(b.metrics[c]))][path[i]] += double(b.value(i, c));
  }
  return m;
}

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lfs::HttpError& e) {
    return e.status;
  }
  return 0;
}

}  // namespace

TEST_CASE("every known pprof sample type is a metric, and back") {
  struct Case {
    const char* type;
    const char* unit;
    const char* metric;
  };
  for (const Case& c : std::vector<Case>{{"samples", "count", "samples"},
                                         {"sample", "count", "samples"},
                                         {"cpu", "nanoseconds", "time"},
                                         {"wall", "nanoseconds", "time"},
                                         {"alloc_space", "bytes", "alloc_bytes"},
                                         {"alloc_objects", "count", "alloc_count"},
                                         {"inuse_space", "bytes", "live_bytes"},
                                         {"inuse_objects", "count", "live_count"},
                                         {"space", "bytes", "live_bytes"},
                                         {"objects", "count", "live_count"},
                                         {"calls", "count", "calls"}}) {
    CAPTURE(c.type);
    int m = lfs::pprof_type_metric(c.type, c.unit);
    CHECK(m == lfs::metric_index(c.metric));
    CHECK(lfs::pprof_type_metric(lfs::metric_pprof_type(m).type, lfs::metric_pprof_type(m).unit) ==
          m);
  }
  CHECK(lfs::pprof_type_metric("cpu", "seconds") == -1);
  CHECK(lfs::pprof_type_metric("goroutine", "count") == -1);
}

TEST_CASE("pprof_to_batch: one column per sample type, unknown types refused by name") {
  lf::Tree cpu = tree_of("main a.lua:1;f a.lua:5 3\nmain a.lua:1 1\n");
  lf::Tree ns = tree_of("main a.lua:1;f a.lua:5 30\nmain a.lua:1 10\n");
  std::string body =
      lf::write_pprof({{{"samples", "count"}, &cpu, 0}, {{"cpu", "nanoseconds"}, &ns, 0}}, {});
  lfs::PprofBatch pb = lfs::pprof_to_batch(body, "", "", strict());
  auto m = columns(pb.batch);
  CHECK(m["samples"]["main a.lua:1;f a.lua:5"] == 3);
  CHECK(m["time"]["main a.lua:1"] == 10);
  std::string odd = lf::write_pprof({{{"goroutine", "count"}, &cpu, 0}}, {});
  try {
    lfs::pprof_to_batch(odd, "", "", strict());
    FAIL("accepted");
  } catch (const lfs::HttpError& e) {
    CHECK(e.status == 422);
    CHECK(std::string(e.what()).find("'goroutine/count'") != std::string::npos);
  }
  CHECK(status_of([] { lfs::pprof_to_batch("\x1f\x8b junk", "", "", strict()); }) == 400);
  CHECK(status_of([&] { lfs::pprof_to_batch(body, "", "[1,2]", strict()); }) == 400);
}

TEST_CASE(
    "sample_type_config picks the types and their metrics, cumulative types minus prev_profile") {
  lf::Tree a = tree_of("main;alloc 10\n"), b = tree_of("main;alloc 4096\n"),
           c = tree_of("main;alloc 7\n");
  std::string prof = lf::write_pprof({{{"alloc_objects", "count"}, &a, 0},
                                      {{"alloc_space", "bytes"}, &b, 0},
                                      {{"inuse_objects", "count"}, &c, 0}},
                                     {});
  lf::Tree a0 = tree_of("main;alloc 4\n"), b0 = tree_of("main;alloc 1000\n"),
           c0 = tree_of("main;alloc 1\n");
  std::string prev = lf::write_pprof({{{"alloc_objects", "count"}, &a0, 0},
                                      {{"alloc_space", "bytes"}, &b0, 0},
                                      {{"inuse_objects", "count"}, &c0, 0}},
                                     {});
  std::string cfg =
      R"({"alloc_objects":{"units":"objects","cumulative":true},"inuse_objects":{"units":"objects","aggregation":"average"}})";
  auto m = columns(lfs::pprof_to_batch(prof, prev, cfg, strict()).batch);
  CHECK(m.size() == 2);                        // alloc_space is not configured: left out
  CHECK(m["alloc_count"]["main;alloc"] == 6);  // 10 - 4
  CHECK(m["live_count"]["main;alloc"] == 7);   // not cumulative: as sent
  CHECK(status_of([&] {
          lfs::pprof_to_batch(prof, "", R"({"alloc_objects":{"units":"lock_samples"}})", strict());
        }) == 422);
}

// One stack `main` with one value of alloc_objects/count, written by hand: the
// engine's writer takes counts from folded text, which has no negative ones.
std::string one_count(int64_t v) {
  std::string p, vt, sample, line, loc, fn;
  lft::field_varint(vt, 1, 1);
  lft::field_varint(vt, 2, 2);
  lft::field_bytes(p, 1, vt);
  lft::field_varint(sample, 1, 1);
  lft::field_varint(sample, 2, uint64_t(v));
  lft::field_bytes(p, 2, sample);
  lft::field_varint(line, 1, 1);
  lft::field_varint(loc, 1, 1);
  lft::field_bytes(loc, 4, line);
  lft::field_bytes(p, 4, loc);
  lft::field_varint(fn, 1, 1);
  lft::field_varint(fn, 2, 3);
  lft::field_bytes(p, 5, fn);
  for (const char* s : {"", "alloc_objects", "count", "main"}) lft::field_bytes(p, 6, s);
  return p;
}

// Found by fuzz_pprof (UBSan: 5e18 - -2^63 overflowed): a previous count that
// is negative subtracts nothing; a count that went down gained nothing.
TEST_CASE("regression: cumulative minus a negative or larger previous count never overflows") {
  std::string cfg = R"({"alloc_objects":{"units":"objects","cumulative":true}})";
  auto gained = [&](int64_t now, int64_t prev) {
    auto m = columns(lfs::pprof_to_batch(one_count(now), one_count(prev), cfg, strict()).batch);
    return m["alloc_count"]["main"];
  };
  CHECK(gained(5000000000000000000, INT64_MIN) == 5000000000000000000.0);
  CHECK(gained(INT64_MAX, -1) == double(INT64_MAX));
  CHECK(gained(10, 4) == 6);
  CHECK(gained(3, 9) == 0);  // a counter reset: nothing new, not a negative value
  CHECK(gained(7, 0) == 7);
}

TEST_CASE("frames of a profile are checked as strict folded input: named faults, 400") {
  lf::Tree bad = tree_of("main;\xff\xfe 3\n");
  std::string body = lf::write_pprof({{{"samples", "count"}, &bad, 0}}, {});
  try {
    lfs::pprof_to_batch(body, "", "", strict());
    FAIL("accepted");
  } catch (const lfs::HttpError& e) {
    CHECK(e.status == 400);
    CHECK(std::string(e.what()).find("invalid UTF-8") != std::string::npos);
  }
  lf::Tree ok = tree_of("main;write0;  3\n");  // a blank frame is fine, as in folded uploads
  auto blank = columns(
      lfs::pprof_to_batch(lf::write_pprof({{{"samples", "count"}, &ok, 0}}, {}), "", "", strict())
          .batch);
  CHECK(blank["samples"].size() == 1);
  CHECK(blank["samples"]["main;write0; "] == 3);
}

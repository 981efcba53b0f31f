// Request bodies -> batches: strict folded parsing, Pyroscope names and
// units, the "lines" format, wire chunks.
#include <doctest/doctest.h>

#include "app.hpp"
#include "ingest.hpp"

namespace {

lf::ParseOptions strict() {
  lf::ParseOptions o;
  o.strict = true;
  return o;
}

int status_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const lfs::HttpError& e) {
    return e.status;
  }
  return 0;
}

}  // namespace

TEST_CASE("folded body: CRLF and blank lines fine, bad lines refuse all with line and reason") {
  lfs::Batch b;
  b.metrics = {0};
  CHECK(lfs::parse_folded_batch("a;b 1\r\n\na;b 2\na;c 1.5\n", strict(), b) == 3);
  REQUIRE(b.stacks.size() == 3);  // repeats are merged by the store (test_store)
  CHECK(b.stacks[0].first == "a;b");
  CHECK(b.stacks[1].second[0] == 2);
  CHECK(b.stacks[2].second[0] == 1.5);

  struct Case { const char* text; std::size_t line; };
  Case cases[] = {{"a;b 1\nno count here\n", 2}, {"a 1\nb -3\n", 2}, {"a 1\nb 1 2\n", 2}};
  for (const Case& c : cases) {
    CAPTURE(c.text);
    lfs::Batch bad;
    bad.metrics = {0};
    try {
      lfs::parse_folded_batch(c.text, strict(), bad);
      FAIL("accepted");
    } catch (const lfs::HttpError& e) {
      CHECK(e.status == 400);
      CHECK(e.extra["line"] == c.line);
      CHECK(e.extra.contains("reason"));
    }
  }
}

// flamegraph.pl compat: perf captures with unresolved symbols were refused
// (400), so `luaflame push` failed on them.
TEST_CASE("regression: blank and empty frames are accepted, as flamegraph.pl draws them") {
  lfs::Batch b;
  b.metrics = {0};
  CHECK(lfs::parse_folded_batch("write0;  3\na;;b 1\nwrite0; 2\n", strict(), b) == 3);
  REQUIRE(b.stacks.size() == 3);
  CHECK(b.stacks[0].first == "write0; ");
  CHECK(b.stacks[1].first == "a;;b");
  CHECK(b.stacks[2].first == "write0");
}

TEST_CASE("pyroscope name: app, kind and labels") {
  auto n = lfs::parse_pyroscope_name("my.awesome.app.cpu{env=staging,region=us-west-1}");
  CHECK(n.app == "my.awesome.app");
  CHECK(n.kind == "cpu");
  CHECK(n.labels.size() == 2);
  CHECK(n.labels.at("region") == "us-west-1");
  auto plain = lfs::parse_pyroscope_name("simple");
  CHECK(plain.app == "simple");
  CHECK(plain.kind.empty());
  for (const char* bad : {"", "{a=b}", "app{a}", "app{a=b", "sp ace.cpu", "app{=v}"}) {
    CAPTURE(bad);
    CHECK(status_of([&] { lfs::parse_pyroscope_name(bad); }) == 400);
  }
}

TEST_CASE("pyroscope units and aggregation map to metrics") {
  CHECK(lfs::pyroscope_metric("", "", "cpu") == lfs::metric_index("samples"));
  CHECK(lfs::pyroscope_metric("samples", "sum", "") == lfs::metric_index("samples"));
  CHECK(lfs::pyroscope_metric("bytes", "sum", "") == lfs::metric_index("alloc_bytes"));
  CHECK(lfs::pyroscope_metric("bytes", "average", "") == lfs::metric_index("live_bytes"));
  CHECK(lfs::pyroscope_metric("", "", "inuse_space") == lfs::metric_index("live_bytes"));
  CHECK(lfs::pyroscope_metric("objects", "", "") == lfs::metric_index("alloc_count"));
  CHECK(status_of([] { lfs::pyroscope_metric("furlongs", "", ""); }) == 422);
  CHECK(status_of([] { lfs::pyroscope_metric("samples", "median", ""); }) == 422);
  CHECK(lfs::pyroscope_metric("objects", "average", "") == lfs::metric_index("live_count"));
  CHECK(lfs::pyroscope_metric("", "", "inuse_objects") == lfs::metric_index("live_count"));
}

TEST_CASE("upload units and metric") {
  CHECK(lfs::upload_metric("", "") == 0);
  CHECK(lfs::upload_metric("ns", "") == lfs::metric_index("time"));
  CHECK(lfs::upload_metric("bytes", "") == lfs::metric_index("alloc_bytes"));
  CHECK(lfs::upload_metric("bytes", "live_bytes") == lfs::metric_index("live_bytes"));
  CHECK(status_of([] { lfs::upload_metric("parsecs", ""); }) == 422);
  CHECK(status_of([] { lfs::upload_metric("", "speed"); }) == 422);
}

TEST_CASE("lines format: each line one sample, line numbers kept") {
  CHECK(lfs::lines_to_folded("a;b\n\na;b\r\nc") == "a;b 1\n\na;b 1\nc 1\n");
  lfs::Batch b;
  b.metrics = {0};
  lfs::parse_folded_batch(lfs::lines_to_folded("a;b\na;b\nc\n"), strict(), b);
  REQUIRE(b.stacks.size() == 3);
  CHECK(b.stacks[0].first == "a;b");
  CHECK(b.stacks[2].first == "c");
}

TEST_CASE("wire chunk: decoded into stacks; bad frames and unknown versions refused") {
  lfw::Chunk c;
  c.seq = 4;
  c.metrics = {"samples", "time"};
  c.frames = {"main", "f"};
  c.nodes = {{-1, 0, {0, 0}}, {0, 1, {3, 300}}};
  std::string text;
  lfw::encode(c, text);
  lfs::Batch b;
  auto back = lfs::decode_chunk(text, strict(), b);
  CHECK(back.seq == 4);
  CHECK(b.metrics == std::vector<int>{0, 1});
  REQUIRE(b.stacks.size() == 1);
  CHECK(b.stacks[0].first == "main;f");
  CHECK(b.stacks[0].second == std::vector<double>{3, 300});

  lfs::Batch b2;
  CHECK(status_of([&] { lfs::decode_chunk("luaflame-wire 2\n", strict(), b2); }) == 400);
  lfw::Chunk bad = c;
  bad.frames[1] = std::string("bad\x01name");
  std::string bad_text;
  lfw::encode(bad, bad_text);
  lfs::Batch b3;
  CHECK(status_of([&] { lfs::decode_chunk(bad_text, strict(), b3); }) == 400);
  lf::ParseOptions shallow = strict();
  shallow.max_depth = 1;
  lfs::Batch b4;
  CHECK(status_of([&] { lfs::decode_chunk(text, shallow, b4); }) == 400);
}

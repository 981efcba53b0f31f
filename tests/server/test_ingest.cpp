// Request bodies -> batches: strict folded parsing, Pyroscope names and
// units, the "lines" format, wire chunks.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "http/app.hpp"
#include "ingest/ingest.hpp"

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

// The batch's stacks as folded text -> values (per column), from its tree.
std::map<std::string, std::vector<int64_t>> stacks_of(const lfs::Batch& b) {
  std::map<std::string, std::vector<int64_t>> out;
  std::vector<std::string> path(b.nodes.size());
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    const auto& n = b.nodes[i];
    path[i] =
        (n.parent < 0 ? "" : path[static_cast<std::size_t>(n.parent)] + ";") + b.frames[n.frame];
    std::vector<int64_t> v;
    bool any = false;
    for (std::size_t c = 0; c < b.metrics.size(); ++c) {
      v.push_back(b.value(i, c));
      any = any || v.back();
    }
    if (!any) continue;
    auto& slot = out[path[i]];
    if (slot.empty()) slot.assign(v.size(), 0);
    for (std::size_t c = 0; c < v.size(); ++c) slot[c] += v[c];
  }
  return out;
}

}  // namespace

TEST_CASE("folded body: CRLF and blank lines fine, bad lines refuse all with line and reason") {
  lfs::Batch b;
  b.metrics = {0};
  CHECK(lfs::parse_folded_batch("a;b 1\r\n\na;b 2\na;c 15\nd 2.0\n", strict(), b) == 4);
  auto stacks = stacks_of(b);
  REQUIRE(stacks.size() == 3);  // a repeated stack is one node
  CHECK(stacks["a;b"] == std::vector<int64_t>{3});
  CHECK(stacks["a;c"] == std::vector<int64_t>{15});
  CHECK(stacks["d"] == std::vector<int64_t>{2});  // a whole count written as 2.0
  CHECK(b.frames.size() == 4);                    // a, b, c, d: each name once

  struct Case {
    const char* text;
    std::size_t line;
  };
  Case cases[] = {{"a;b 1\nno count here\n", 2},
                  {"a 1\nb -3\n", 2},
                  {"a 1\nb 1 2\n", 2},
                  {"a 1\nb 1.5\n", 2},
                  {"a 9223372036854775808\n", 1},
                  {"a 9223372036854775807\na 1\n", 2}};
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
  auto stacks = stacks_of(b);
  REQUIRE(stacks.size() == 3);
  CHECK(stacks["write0; "] == std::vector<int64_t>{3});
  CHECK(stacks["a;;b"] == std::vector<int64_t>{1});
  CHECK(stacks["write0"] == std::vector<int64_t>{2});
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
  auto stacks = stacks_of(b);
  REQUIRE(stacks.size() == 2);
  CHECK(stacks["a;b"] == std::vector<int64_t>{2});
  CHECK(stacks["c"] == std::vector<int64_t>{1});
}

TEST_CASE("wire chunk: decoded into a tree, bad frames and unknown versions refused") {
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
  auto stacks = stacks_of(b);
  REQUIRE(stacks.size() == 1);
  CHECK(stacks["main;f"] == std::vector<int64_t>{3, 300});
  CHECK(b.nodes.size() == 2);

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

namespace {

// Peak resident memory of this process since the last reset_peak(), in bytes.
int64_t peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}
int64_t current_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}
// Linux: writing 5 to clear_refs resets the peak (VmHWM) to the current RSS.
bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

struct TempStore {
  std::string dir;
  std::unique_ptr<lfs::Store> store;
  TempStore() {
    char tmpl[] = "/tmp/luaflame-ingest-XXXXXX";
    dir = mkdtemp(tmpl);
    lfs::StoreOptions o;
    o.sync_full = false;
    store = lfs::open_sqlite_store(dir, o);
  }
  ~TempStore() {
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

TEST_CASE(
    "regression: an 11 KB chunk of a 1,024-deep chain of 1 KB frames costs under 10 MB (was 1 "
    "GB)") {
  lfw::Chunk c;
  c.metrics = {"samples"};
  c.frames = {std::string(1000, 'f') + " chain.lua:1"};
  for (int i = 0; i < 1024; ++i) c.nodes.push_back({i - 1, 0, {i == 1023 ? 1u : 0u}});
  std::string body;
  lfw::encode(c, body);
  CHECK(body.size() < 12 * 1024);
  TempStore ts;
  lfs::NewRun r;
  r.name = "chain";
  r.stream = "chain";
  r.finished = false;
  bool created = false;
  int64_t id = ts.store->open_stream(r, created);
  REQUIRE(reset_peak());
  const int64_t before = current_rss();
  for (uint64_t seq = 0; seq < 20; ++seq) {
    lfs::Batch b;
    lf::ParseOptions o = strict();
    o.max_frame_bytes = 4096;
    lfs::decode_chunk(body, o, b);
    b.from_ns = b.until_ns = 1700000000000000000LL + static_cast<int64_t>(seq) * 10000000000LL;
    REQUIRE(ts.store->append(id, static_cast<int64_t>(seq), b) == lfs::AppendStatus::ok);
  }
  const int64_t extra = peak_rss() - before;
  MESSAGE("20 chain chunks (" << body.size() << " bytes each): peak " << extra / 1024
                              << " KiB over the start");
  CHECK(extra < 10 << 20);
  lfs::StoredTree t;
  ts.store->read_tree(id, 0, INT64_MIN, INT64_MAX, t);
  REQUIRE(t.values.size() == 1);
  CHECK(t.values[0].second == 20);
  CHECK(t.nodes.size() == 1024);
  CHECK(t.frames.size() == 1);
}

TEST_CASE(
    "regression: a folded upload of 10 million tiny lines stays within 3x its size (was 1.24 GB "
    "for 60 MB)") {
  std::string body;
  body.reserve(60u << 20);
  for (int i = 0; i < 10000000; ++i) {
    body += "a;";
    body += static_cast<char>('a' + i % 26);
    body += " 1\n";
  }
  REQUIRE(reset_peak());
  const int64_t before = current_rss();  // the body is already resident
  TempStore ts;
  lfs::Batch b;
  b.metrics = {0};
  CHECK(lfs::parse_folded_batch(body, strict(), b) == 10000000);
  lfs::NewRun r;
  r.name = "tiny";
  r.metrics = {0};
  int64_t id = ts.store->create_run(r, b);
  const int64_t extra = peak_rss() - before;
  MESSAGE("10M lines, " << body.size() / 1000000 << " MB: peak " << extra / 1024
                        << " KiB over the body");
  CHECK(extra + static_cast<int64_t>(body.size()) < 3 * static_cast<int64_t>(body.size()));
  CHECK(ts.store->get_run(id)->totals.at(0) == 10000000);
  CHECK(ts.store->get_run(id)->stack_count == 26);
}

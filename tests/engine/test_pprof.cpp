// The pprof codec (engine/include/luaflame/pprof.hpp). Hand-encoded protobuf
// bytes (a tiny writer below, independent of the generated code) check the
// reader; the writer is checked by reading back, and against go tool pprof
// in tests/server (pprof_test.sh).
#include "luaflame/pprof.hpp"

#include <zlib.h>

#include <map>
#include <string>
#include <vector>

#include "golden.hpp"
#include "protowire.hpp"

namespace {

using golden::tree_of;

// A minimal protobuf writer for hand-made profiles (tests/support/protowire.hpp).
using lft::field_bytes;
using lft::field_varint;

// A CPU profile: samples/count + cpu/nanoseconds; main -> work (x2), main -> idle.
// Strings: 0 "", 1 samples, 2 count, 3 cpu, 4 nanoseconds, 5 main, 6 work, 7 idle, 8 app.go
std::string cpu_profile(int extra_value = 0, uint64_t bad_location = 0) {
  std::string p;
  auto vt = [](int t, int u) {
    std::string m;
    field_varint(m, 1, uint64_t(t));
    field_varint(m, 2, uint64_t(u));
    return m;
  };
  field_bytes(p, 1, vt(1, 2));
  field_bytes(p, 1, vt(3, 4));
  auto sample = [&](std::vector<uint64_t> locs, std::vector<int64_t> vals) {
    std::string s;
    for (uint64_t l : locs) field_varint(s, 1, l);  // unpacked is valid protobuf too
    for (int64_t v : vals) field_varint(s, 2, uint64_t(v));
    return s;
  };
  std::vector<int64_t> v1 = {2, 20000000}, v2 = {1, 10000000};
  if (extra_value) v1.push_back(extra_value);
  field_bytes(p, 2, sample({2, 1}, v1));
  field_bytes(p, 2, sample({bad_location ? bad_location : 3, 1}, v2));
  field_bytes(p, 2, sample({2, 1}, {1, 10000000}));
  for (uint64_t id = 1; id <= 3; ++id) {
    std::string line, loc, fn;
    field_varint(line, 1, id);
    field_varint(line, 2, 10 * id);
    field_varint(loc, 1, id);
    field_bytes(loc, 4, line);
    field_bytes(p, 4, loc);
    field_varint(fn, 1, id);
    field_varint(fn, 2, 4 + id);
    field_varint(fn, 4, id == 3 ? 0 : 8);  // idle has no file
    field_varint(fn, 5, id == 1 ? 3 : 0);  // main starts at line 3
    field_bytes(p, 5, fn);
  }
  for (const char* s :
       {"", "samples", "count", "cpu", "nanoseconds", "main", "work", "idle", "app.go"})
    field_bytes(p, 6, s);
  return p;
}

std::string gzip(const std::string& in) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, uLong(in.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::map<std::string, std::vector<int64_t>> stacks_of(const lf::PprofProfile& p) {
  std::map<std::string, std::vector<int64_t>> m;
  for (const lf::PprofStack& s : p.stacks) m[lf::stack_text(p, s)] = s.values;
  return m;
}

}  // namespace

TEST_CASE(
    "read_pprof: stacks root first, functions as NAME FILE:LINE, samples merged, gzip or plain") {
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    std::string body = gz ? gzip(cpu_profile()) : cpu_profile();
    CHECK(lf::looks_like_pprof(body));
    lf::PprofProfile p;
    std::string err;
    REQUIRE_MESSAGE(lf::read_pprof(body, {}, p, err), err);
    REQUIRE(p.sample_types.size() == 2);
    CHECK(p.sample_types[0].type == "samples");
    CHECK(p.sample_types[1].unit == "nanoseconds");
    CHECK(p.samples == 3);
    auto m = stacks_of(p);
    REQUIRE(m.size() == 2);
    CHECK(m["main app.go:3;work app.go"] == std::vector<int64_t>{3, 30000000});
    CHECK(m["main app.go:3;idle"] == std::vector<int64_t>{1, 10000000});
  }
}

TEST_CASE("read_pprof refuses bad and hostile bodies by name") {
  struct Case {
    std::string name, body, error;
    lf::PprofLimits lim;
  };
  lf::PprofLimits tiny;
  tiny.max_messages = 2;
  lf::PprofLimits short_strings;
  short_strings.max_string_bytes = 5;
  lf::PprofLimits shallow;
  shallow.max_depth = 1;
  lf::PprofLimits small;
  small.max_decoded_bytes = 1 << 20;
  lf::PprofLimits flat;
  flat.max_nesting = 1;
  std::string good = cpu_profile();
  std::vector<Case> cases = {
      {"empty", "", "empty profile", {}},
      {"truncated", good.substr(0, good.size() - 3), "truncated", {}},
      {"not protobuf", "\x0a\x05hello world; 3", "", {}},
      {"too many samples", good, "more than 2 samples (limit)", tiny},
      {"long string", good, "string of 7 bytes, limit 5", short_strings},
      {"too deep", good, "deeper than 1 frames (limit)", shallow},
      {"nesting", good, "nested deeper than 1", flat},
      {"value count", cpu_profile(7), "sample 0 has 3 values for 2 sample types", {}},
      {"unknown location",
       cpu_profile(0, 99),
       "names location 99, which is not in the profile",
       {}},
      {"gzip bomb", gzip(std::string(64 << 20, 'x')),
       "more than 1048576 bytes after gunzip (limit)", small},
      {"bad gzip", std::string("\x1f\x8b\x08\x00garbage", 11), "bad gzip data", {}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    lf::PprofProfile p;
    std::string err;
    CHECK_FALSE(lf::read_pprof(c.body, c.lim, p, err));
    CAPTURE(err);
    CHECK(err.rfind("pprof: ", 0) == 0);
    CHECK(err.find(c.error) != std::string::npos);
  }
}

TEST_CASE("looks_like_pprof: never folded text") {
  for (const char* s : {"main;work 3\n", "\nmain 1\n", "", "\x0a"}) {
    CAPTURE(s);
    CHECK_FALSE(lf::looks_like_pprof(s));
  }
}

// Regression: `luaflame svg cpu.pb.gz` titled Go's CPU profile "700,000,000 samples".
TEST_CASE("svg_units_of: a sample type's unit in the titles") {
  struct Case {
    lf::PprofValueType type;
    std::string unit, count_name;
  };
  const std::vector<Case> cases = {
      {{"cpu", "nanoseconds"}, "ns", "samples"},
      {{"inuse_space", "bytes"}, "bytes", "samples"},
      {{"goroutine", "count"}, "", "goroutine"},
      {{"", ""}, "", "samples"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.type.type);
    CAPTURE(c.type.unit);
    lf::SvgOptions o;
    REQUIRE(o.count_name == "samples");
    lf::svg_units_of(c.type, o);
    CHECK(o.unit == c.unit);
    CHECK(o.count_name == c.count_name);
  }
}

TEST_CASE("split_frame_location") {
  struct Case {
    const char* frame;
    bool ok;
    const char* name;
    const char* file;
    int64_t line;
  };
  for (const Case& c :
       std::vector<Case>{{"step app.lua:20", true, "step", "app.lua", 20},
                         {"f @/a b/x.lua:7", true, "f", "@/a b/x.lua", 7},
                         {"[C] string.rep", false, "[C] string.rep", "", 0},
                         {"main.work", false, "main.work", "", 0},
                         {"main.work /src/app.go", true, "main.work", "/src/app.go", 0},
                         {"x y:", false, "x y:", "", 0},
                         {"a:12", false, "a:12", "", 0}}) {
    CAPTURE(c.frame);
    std::string_view name, file;
    int64_t line = -1;
    CHECK(lf::split_frame_location(c.frame, name, file, line) == c.ok);
    CHECK(name == c.name);
    CHECK(file == c.file);
    CHECK(line == c.line);
  }
}

TEST_CASE("write_pprof: every series a sample type, read back gives the same stacks") {
  lf::Tree cpu = tree_of(
      "main app.lua:1;step app.lua:20 30\nmain app.lua:1 12\nmain app.lua:1;[C] string.rep 7\n");
  lf::Tree mem = tree_of("main app.lua:1;step app.lua:20 4096\nmain app.lua:1;alloc x.lua:3 100\n");
  std::string out =
      lf::write_pprof({{{"samples", "count"}, &cpu, 0}, {{"alloc_space", "bytes"}, &mem, 0}},
                      lf::PprofWriteOptions{});
  lf::PprofProfile p;
  std::string err;
  REQUIRE_MESSAGE(lf::read_pprof(out, {}, p, err), err);
  REQUIRE(p.sample_types.size() == 2);
  CHECK(p.sample_types[1].type == "alloc_space");
  auto m = stacks_of(p);
  CHECK(m.size() == 4);
  CHECK(m["main app.lua:1;step app.lua:20"] == std::vector<int64_t>{30, 4096});
  CHECK(m["main app.lua:1"] == std::vector<int64_t>{12, 0});
  CHECK(m["main app.lua:1;[C] string.rep"] == std::vector<int64_t>{7, 0});
  CHECK(m["main app.lua:1;alloc x.lua:3"] == std::vector<int64_t>{0, 100});
}

TEST_CASE(
    "hostile bytes: mutated and truncated profiles are refused or read, never obeyed or crashed "
    "on") {
  std::string good = cpu_profile();
  uint32_t seed = 12345;
  auto rnd = [&] { return seed = seed * 1664525u + 1013904223u; };
  std::size_t refused = 0, read = 0;
  lf::PprofLimits lim;
  lim.max_decoded_bytes = 1 << 20;
  for (int i = 0; i < 3000; ++i) {
    std::string body = good;
    int edits = 1 + int(rnd() % 4);
    for (int e = 0; e < edits; ++e) body[rnd() % body.size()] = char(rnd() >> 24);
    if (i % 7 == 0) body.resize(rnd() % body.size());
    if (i % 11 == 0) body = gzip(body);
    CAPTURE(i);
    lf::PprofProfile p;
    std::string err;
    if (lf::read_pprof(body, lim, p, err)) {
      ++read;
      for (const lf::PprofStack& s : p.stacks) CHECK(s.values.size() == p.sample_types.size());
    } else {
      ++refused;
      CHECK(err.rfind("pprof: ", 0) == 0);
    }
  }
  CHECK(refused > 0);
  CHECK(read + refused == 3000);
}

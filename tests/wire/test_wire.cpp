// Unit tests of the wire format (wire/include/luaflame/wire.hpp).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "luaflame/wire.hpp"

namespace {

lfw::Chunk sample_chunk() {
  lfw::Chunk c;
  c.seq = 3;
  c.from_ns = 1000;
  c.until_ns = 2000;
  c.metrics = {"samples", "calls"};
  c.frames = {"main a.lua:1", "f a.lua:3", "[C] string.rep"};
  c.nodes = {{-1, 0, {0, 1}}, {0, 1, {5, 2}}, {1, 2, {7, 0}}, {0, 2, {1, 1}}};
  return c;
}

}  // namespace

TEST_CASE("wire: encode then decode gives the same chunk") {
  lfw::Chunk c = sample_chunk(), d;
  std::string text, err;
  lfw::encode(c, text);
  REQUIRE(lfw::decode(text, d, err));
  CHECK(d.seq == 3);
  CHECK(d.from_ns == 1000);
  CHECK(d.until_ns == 2000);
  CHECK(d.metrics == c.metrics);
  CHECK(d.frames == c.frames);
  REQUIRE(d.nodes.size() == 4);
  CHECK(d.nodes[2].parent == 1);
  CHECK(d.nodes[2].values == std::vector<uint64_t>{7, 0});
}

TEST_CASE("wire: for_each_stack rebuilds folded stacks from shared prefixes") {
  std::map<std::string, std::vector<uint64_t>> got;
  lfw::for_each_stack(sample_chunk(),
                      [&](const std::string& s, const std::vector<uint64_t>& v) { got[s] = v; });
  CHECK(got.size() == 4);
  CHECK(got["main a.lua:1;f a.lua:3;[C] string.rep"] == std::vector<uint64_t>{7, 0});
  CHECK(got["main a.lua:1;[C] string.rep"] == std::vector<uint64_t>{1, 1});
}

TEST_CASE("wire: a reader rejects a wrong version by name") {
  lfw::Chunk d;
  std::string err;
  CHECK_FALSE(lfw::decode("luaflame-wire 2\nseq 0\nmetrics samples\nend 0\n", d, err));
  CHECK(err.find("luaflame-wire 2 is not supported") != std::string::npos);
}

TEST_CASE("wire: malformed chunks are refused with the line number") {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"", "empty chunk"},
      {"hello\n", "not a luaflame-wire chunk"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nf a\nn - 0 1\n", "truncated"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nf a\nn 5 0 1\nend 1\n", "line 5"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nn - 0 1\nend 1\n", "not a defined frame"},
      {"luaflame-wire 1\nseq 0\nmetrics bogus\nend 0\n", "unknown metric 'bogus'"},
      {"luaflame-wire 1\nseq 0\nmetrics samples time\nf a\nn - 0 1\nend 1\n", "1 values for 2"},
      {"luaflame-wire 1\nseq x\nmetrics samples\nend 0\n", "bad number after seq"},
      {"luaflame-wire 1\nmetrics samples\nend 0\n", "no seq header"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nf a\nn - 0 1\nend 2\n", "end count"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nend 0\nf x\n", "data after end"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nf a;b\nend 0\n", "';'"},
      // Issue 12: values the server would store wrongly.
      {"luaflame-wire 1\nseq 9223372036854775808\nmetrics samples\nend 0\n", "up to 2^63-1"},
      {"luaflame-wire 1\nseq 0\nfrom 18446744073709551615\nmetrics samples\nend 0\n",
       "up to 2^63-1"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nf a\nn - 0 9223372036854775808\nend 1\n",
       "up to 2^63-1"},
      {"luaflame-wire 1\nseq 0\nmetrics samples samples\nend 0\n", "metric 'samples' listed twice"},
      {"luaflame-wire 1\nseq 0\nmetrics samples\nmetrics time\nend 0\n", "metrics listed twice"},
      // Found by fuzz/fuzz_wire: no metrics line decoded, and did not encode back.
      {"luaflame-wire 1\nseq 2\nf ms time\nend 0\n", "no metrics header"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    lfw::Chunk d;
    std::string err;
    CHECK_FALSE(lfw::decode(c.text, d, err));
    CHECK(err.find(c.want) != std::string::npos);
  }
}

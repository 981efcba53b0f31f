// Config: flags, LUAFLAME_* variables, sizes, and clear errors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "config.hpp"

using lfs::parse_config;

TEST_CASE("defaults are loopback, 64 MiB, no token") {
  auto r = parse_config({}, {});
  REQUIRE(r.error.empty());
  CHECK(r.config.host == "127.0.0.1");
  CHECK(r.config.port == 8080);
  CHECK(r.config.max_body == 64u << 20);
  CHECK(r.config.token.empty());
  CHECK(r.config.web_dir == LUAFLAME_WEB_DIR);
}

TEST_CASE("flags override environment") {
  auto r = parse_config({"--listen", "0.0.0.0:9000", "--token=abc", "--max-body", "1M"},
                        {"LUAFLAME_LISTEN=127.0.0.1:7000", "LUAFLAME_TOKEN=env",
                         "LUAFLAME_KEEP_RUNS=5", "PATH=/bin"});
  REQUIRE(r.error.empty());
  CHECK(r.config.host == "0.0.0.0");
  CHECK(r.config.port == 9000);
  CHECK(r.config.token == "abc");
  CHECK(r.config.max_body == 1u << 20);
  CHECK(r.config.keep_runs == 5);
}

TEST_CASE("bad values are named in the error") {
  struct Case {
    std::vector<std::string> args;
    std::string want;
  };
  std::vector<Case> cases = {
      {{"--listen", "nope"}, "--listen"},
      {{"--listen", "h:99999"}, "--listen"},
      {{"--max-body", "lots"}, "--max-body"},
      {{"--keep-days", "-1"}, "--keep-days"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--frobnicate"}, "unknown option"},
      {{"--data"}, "needs a value"},
      {{"--trusted-proxy", "10.0.0.0/33"}, "--trusted-proxy"},
      {{"--trusted-proxy", ","}, "--trusted-proxy"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args[0]);
    auto r = parse_config(c.args, {});
    CHECK(r.error.find(c.want) != std::string::npos);
  }
  auto env = parse_config({}, {"LUAFLAME_MAX_BODY=x"});
  CHECK(env.error.find("LUAFLAME_MAX_BODY") != std::string::npos);
}

// Issue 31: `--token "$UNSET"` started a server whose writes needed no token.
TEST_CASE("an empty token is refused, an empty LUAFLAME_ variable is unset") {
  for (const char* flag : {"--token", "--read-token"}) {
    CAPTURE(flag);
    auto r = parse_config({flag, ""}, {});
    CHECK(r.error.find(std::string(flag) + " wants a token") != std::string::npos);
    r = parse_config({std::string(flag) + "="}, {});
    CHECK(r.error.find(std::string(flag) + " wants a token") != std::string::npos);
  }
  // compose's `LUAFLAME_TOKEN: ${LUAFLAME_TOKEN:-}` when the host has none
  auto r = parse_config({}, {"LUAFLAME_TOKEN=", "LUAFLAME_MAX_BODY=", "LUAFLAME_READ_TOKEN="});
  REQUIRE(r.error.empty());
  CHECK(r.config.token.empty());
  CHECK(r.config.max_body == 64u << 20);
}

TEST_CASE("sizes take suffixes") {
  uint64_t n = 0;
  CHECK(lfs::parse_size("10", n));
  CHECK(n == 10);
  CHECK(lfs::parse_size("2K", n));
  CHECK(n == 2048);
  CHECK(lfs::parse_size("64MiB", n));
  CHECK(n == 64ull << 20);
  CHECK(lfs::parse_size("1g", n));
  CHECK(n == 1ull << 30);
  CHECK_FALSE(lfs::parse_size("", n));
  CHECK_FALSE(lfs::parse_size("-1", n));
  CHECK_FALSE(lfs::parse_size("99999999999T", n));
}

TEST_CASE("help lists every variable") {
  auto r = parse_config({"--help"}, {});
  CHECK(r.help);
  std::string u = lfs::config_usage();
  for (const char* v : {"LUAFLAME_LISTEN", "LUAFLAME_DATA", "LUAFLAME_TOKEN", "LUAFLAME_MAX_BODY",
                        "LUAFLAME_KEEP_DAYS", "LUAFLAME_KEEP_RUNS", "LUAFLAME_DISK_BUDGET",
                        "LUAFLAME_LOG_LEVEL", "LUAFLAME_WEB"}) {
    CAPTURE(v);
    CHECK(u.find(v) != std::string::npos);
  }
}

// Issue 31: a fixed column of 26 ran "--max-client-connections" and three more into their text.
TEST_CASE("help: every option line has its flag, then two spaces at least, then its text") {
  std::istringstream in(lfs::config_usage());
  std::size_t lines = 0, column = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("  --", 0) != 0) continue;
    CAPTURE(l);
    const std::size_t flag_end = l.find_first_of(' ', 2);
    const std::size_t value = l.compare(flag_end, 6, " VALUE") == 0 ? flag_end + 6 : flag_end;
    CHECK(l.compare(value, 2, "  ") == 0);
    const std::size_t text = l.find_first_not_of(' ', value);
    if (column == 0) column = text;
    CHECK(text == column);  // one column for every text
    ++lines;
  }
  CHECK(lines > 30);
}

TEST_CASE("issue 12 options: token files, public URL, limits") {
  char tmpl[] = "/tmp/luaflame-config-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const std::string dir = tmpl, tf = dir + "/token";
  {
    std::FILE* f = std::fopen(tf.c_str(), "w");
    REQUIRE(f);
    std::fputs("s3cret \n", f);
    std::fclose(f);
  }
  auto r = lfs::parse_config(
      {"--token-file", tf, "--read-token-file", tf, "--public-url", "https://f.example:8443/",
       "--max-client-workers", "8", "--header-timeout", "3", "--max-json-depth", "10"},
      {});
  CAPTURE(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.config.token == "s3cret");
  CHECK(r.config.read_token == "s3cret");
  CHECK(r.config.public_url == "https://f.example:8443");
  CHECK(r.config.max_client_workers == 8);
  CHECK(r.config.header_timeout_seconds == 3);
  CHECK(r.config.max_json_depth == 10);
  struct Bad {
    std::vector<std::string> args;
    const char* want;
  };
  const Bad bad[] = {
      {{"--token-file", dir + "/missing"}, "cannot read"},
      {{"--public-url", "ftp://x"}, "--public-url wants"},
      {{"--public-url", "http://x/path"}, "without a path"},
      {{"--max-connections", "5000"}, "from 1 to 900"},
      {{"--max-headers", "2"}, "from 8 to 10000"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.want);
    auto e = lfs::parse_config(b.args, {});
    CHECK(e.error.find(b.want) != std::string::npos);
  }
  std::remove(tf.c_str());
  rmdir(dir.c_str());
}

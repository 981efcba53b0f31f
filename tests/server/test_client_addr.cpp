// client_addr.hpp: the client behind a trusted proxy (issue 31), as data.
#include <doctest/doctest.h>

#include "http/client_addr.hpp"

namespace {

std::vector<lfs::Cidr> ranges(const char* list) {
  std::vector<lfs::Cidr> out;
  std::string err;
  REQUIRE(lfs::parse_cidrs(list, out, err));
  return out;
}

std::string head(const std::string& headers) {
  return "GET /api/runs HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n";
}

}  // namespace

TEST_CASE("trusted proxies: ranges parse, and bad ones are named") {
  const auto r = ranges("10.0.0.0/8, 192.168.1.7,2001:db8::/32");
  CHECK(lfs::in_ranges("10.200.3.4", r));
  CHECK(lfs::in_ranges("192.168.1.7", r));
  CHECK_FALSE(lfs::in_ranges("192.168.1.8", r));
  CHECK(lfs::in_ranges("2001:db8:1::5", r));
  CHECK_FALSE(lfs::in_ranges("2001:db9::5", r));
  CHECK_FALSE(lfs::in_ranges("not an address", r));
  CHECK(lfs::in_ranges("::ffff:10.1.2.3", r));  // an IPv4 client on an IPv6 socket
  for (const char* bad : {"10.0.0.0/33", "10.0.0/8", "host.example", "::1/129", "1.2.3.4/x"}) {
    CAPTURE(bad);
    std::vector<lfs::Cidr> out;
    std::string err;
    CHECK_FALSE(lfs::parse_cidrs(bad, out, err));
    CHECK(err.find(bad) != std::string::npos);
  }
}

TEST_CASE("trusted proxies: the client is the nearest untrusted address, only via a trusted peer") {
  const auto t = ranges("10.0.0.0/8");
  struct Case {
    const char* peer;
    std::string headers;
    const char* client;
  };
  const Case cases[] = {
      {"10.0.0.5", "X-Forwarded-For: 203.0.113.7\r\n", "203.0.113.7"},
      // a client's own X-Forwarded-For is left of what the proxies appended
      {"10.0.0.5", "X-Forwarded-For: 1.1.1.1, 203.0.113.7, 10.0.0.9\r\n", "203.0.113.7"},
      {"10.0.0.5", "x-forwarded-for: 1.1.1.1\r\nX-Forwarded-For: 203.0.113.8\r\n", "203.0.113.8"},
      {"10.0.0.5", "Forwarded: for=198.51.100.1;proto=http, for=\"[2001:db8::1]:4711\"\r\n",
       "2001:db8::1"},
      {"10.0.0.5", "Forwarded: for=198.51.100.2:8080\r\n", "198.51.100.2"},
      // not an address: the proxy's own address stands
      {"10.0.0.5", "X-Forwarded-For: unknown\r\n", "10.0.0.5"},
      {"10.0.0.5", "X-Forwarded-For: 203.0.113.7, garbage\r\n", "10.0.0.5"},
      {"10.0.0.5", "", "10.0.0.5"},
      // from an address that is no trusted proxy the headers mean nothing
      {"203.0.113.9", "X-Forwarded-For: 1.2.3.4\r\n", "203.0.113.9"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.headers);
    CHECK(lfs::client_of(head(c.headers), c.peer, t) == c.client);
  }
  CHECK(lfs::client_of(head("X-Forwarded-For: 1.2.3.4\r\n"), "10.0.0.5", {}) == "10.0.0.5");
}

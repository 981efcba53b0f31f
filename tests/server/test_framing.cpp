// RFC 9112 framing of request heads (server/http/framing.hpp), as data: each row a
// head, the status it gets (0: framed as told), and a word of the message.
#include <doctest/doctest.h>

#include <string>

#include "http/framing.hpp"

namespace {

struct Row {
  const char* headers;  ///< header lines, each ending in CRLF
  int status;
  const char* says;  ///< part of the message (or "" when accepted)
  bool empty_body;   ///< accepted rows: the body is empty
};

std::string head(const char* headers) {
  return std::string("POST /api/runs HTTP/1.1\r\nHost: x\r\n") + headers + "\r\n";
}

}  // namespace

TEST_CASE("framing: Content-Length and Transfer-Encoding as RFC 9112 has them, or 400/413") {
  const Row rows[] = {
      {"Content-Length: 9\r\n", 0, "", false},
      {"content-length:9\r\n", 0, "", false},
      {"Content-Length:  9 \r\n", 0, "", false},  // optional white space around the value
      {"Transfer-Encoding: chunked\r\n", 0, "", false},
      {"Transfer-Encoding: Chunked\r\n", 0, "", false},
      {"", 0, "", true},  // neither: no body (was: read until the client closed)
      {"Content-Length: 9, 50\r\n", 400, "not a whole number", false},
      {"Content-Length: 9a\r\n", 400, "not a whole number", false},
      {"Content-Length: +9\r\n", 400, "not a whole number", false},
      {"Content-Length: 0x9\r\n", 400, "not a whole number", false},
      {"Content-Length: abc\r\n", 400, "not a whole number", false},
      {"Content-Length: -1\r\n", 400, "not a whole number", false},
      {"Content-Length:\r\n", 400, "empty", false},
      {"Content-Length : 9\r\n", 400, "white space between", false},
      {"Content-Length: 5\r\nContent-Length: 5\r\n", 400, "more than one Content-Length", false},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400, "both Content-Length", false},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400,
       "more than one Transfer-Encoding", false},
      {"Transfer-Encoding: gzip, chunked\r\n", 400, "only 'chunked'", false},
      {"Transfer-Encoding: identity\r\n", 400, "only 'chunked'", false},
      {"X-A: 1\r\n folded\r\n", 400, "folded", false},
      {"no colon here\r\n", 400, "without a name", false},
      {"Content-Length: 70000000\r\n", 413, "over --max-body", false},
      {"Content-Length: 18446744073709551615\r\n", 413, "over --max-body", false},
      {"Content-Length: 99999999999999999999999\r\n", 413, "over --max-body", false},
      {"Content-Length: 67108864\r\n", 0, "", false},  // exactly --max-body
  };
  for (const Row& r : rows) {
    CAPTURE(r.headers);
    const lfs::Framing f = lfs::judge_framing(head(r.headers), 64u << 20);
    CHECK(f.status == r.status);
    CHECK(f.message.find(r.says) != std::string::npos);
    if (r.status == 0) CHECK(f.empty_body == r.empty_body);
  }
}

TEST_CASE("framing: empty lines before the request line are allowed (RFC 9112 2.2)") {
  const lfs::Framing f = lfs::judge_framing("\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 10);
  CHECK(f.status == 0);
  CHECK(f.empty_body);
}

// Issue 31: the front loop reads a body before a worker sees it; a chunked
// body's end is found as its bytes arrive, and lenient chunking is refused.
TEST_CASE("framing: chunked bodies end where RFC 9112 7.1 says, fed whole or byte by byte") {
  struct Case {
    std::string body;
    int status;
    std::size_t end;  ///< where the body ends (when status 0)
  };
  const std::string ok = "4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n";
  const std::string trailer = "3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
  const Case cases[] = {
      {ok + "GET / HTTP/1.1\r\n", 0, ok.size()},  // a pipelined request after it
      {trailer, 0, trailer.size()},
      {"4\r\nWikiXX\r\n0\r\n\r\n", 400, 0},          // data not followed by CRLF
      {"zz\r\nabc\r\n0\r\n\r\n", 400, 0},            // not hex
      {"0x4\r\nWiki\r\n0\r\n\r\n", 400, 0},          // not hex either
      {"ffffffffffffffffff\r\n", 413, 0},            // a size over any limit
      {"401\r\n" + std::string(1025, 'a'), 413, 0},  // over max_body 1024
  };
  for (const Case& c : cases) {
    CAPTURE(c.body);
    lfs::ChunkScan whole;
    whole.feed(c.body, 1024);
    CHECK(whole.status == c.status);
    if (c.status == 0) {
      CHECK(whole.done);
      CHECK(whole.at == c.end);
    }
    lfs::ChunkScan bytes;  // the same, one more byte at a time
    for (std::size_t n = 1; n <= c.body.size() && !bytes.done && !bytes.status; ++n)
      bytes.feed(std::string_view(c.body).substr(0, n), 1024);
    CHECK(bytes.status == c.status);
    if (c.status == 0) CHECK(bytes.at == c.end);
  }
  lfs::ChunkScan part;
  part.feed("4\r\nWi", 1024);
  CHECK_FALSE(part.done);
  CHECK(part.status == 0);
}

TEST_CASE("framing: the declared length and chunked are told to the front loop") {
  auto f = lfs::judge_framing("POST / HTTP/1.1\r\nContent-Length: 42\r\n\r\n", 100);
  CHECK(f.status == 0);
  CHECK(f.length == 42);
  CHECK_FALSE(f.chunked);
  f = lfs::judge_framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 100);
  CHECK(f.chunked);
  CHECK_FALSE(f.empty_body);
  f = lfs::judge_framing("GET / HTTP/1.1\r\n\r\n", 100);
  CHECK(f.empty_body);
  CHECK_FALSE(f.chunked);
}

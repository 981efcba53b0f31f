// RFC 9112 message framing of a request head, judged by the front loop
// (front.cpp) before httplib reads a byte of the body: httplib 0.11 is
// lenient (it reads "9a" as 9, "0x9" as 0, a POST without Content-Length or
// Transfer-Encoding until the client closes), and leniency in framing is how
// requests are smuggled past a proxy or hold a worker forever.
// A pure function over the head's text: no socket, no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lfs {

struct Framing {
  int status = 0;       ///< 0: frame it as told; 400 or 413: refuse and close
  std::string message;  ///< why, for the refusal
  bool empty_body =
      false;               ///< neither Content-Length nor Transfer-Encoding: no body (RFC 9112 6.3)
  bool chunked = false;    ///< Transfer-Encoding: chunked
  std::size_t length = 0;  ///< the declared Content-Length (0 when chunked or empty)
};

/// Where a chunked body ends, scanned as its bytes arrive (RFC 9112 7.1):
/// chunk-size in hex (extensions after ';' ignored), CRLF, the data, CRLF;
/// the last chunk (size 0), trailer lines, CRLF. Strict: the data must be
/// followed by CRLF, a size must be hex digits, and the data in all may not
/// pass `max_body` (413).
struct ChunkScan {
  std::size_t at = 0;       ///< offset (in the body) of the next chunk-size line
  std::size_t decoded = 0;  ///< data bytes so far
  bool done = false;        ///< the whole body is in: it ends at `at`
  bool trailers = false;    ///< past the last chunk, reading trailer lines
  int status = 0;           ///< 400 or 413: malformed or too large
  std::string message;
  /// Scans `body` (every byte of the body received so far, from its start).
  void feed(std::string_view body, std::size_t max_body);
};

/// Judges the head `head` (request line to the empty line, CRLFs included):
///   - a header line must be NAME ":" VALUE with no white space before the
///     colon and no line folding (400);
///   - Content-Length is 1*DIGIT between optional white space, given once;
///     over `max_body` it is refused from the head (413);
///   - Transfer-Encoding is given once and is exactly "chunked", never beside
///     Content-Length (400);
///   - with neither, the body is empty (`empty_body`).
Framing judge_framing(std::string_view head, std::size_t max_body);

}  // namespace lfs

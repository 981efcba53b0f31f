// RFC 9112 framing of a request head (framing.hpp).
#include "http/framing.hpp"

#include "http/ascii.hpp"

namespace lfs {

namespace {

constexpr auto ieq = ascii_iequal;
constexpr auto trim = trim_ows;

Framing refuse(int status, std::string message) {
  Framing f;
  f.status = status;
  f.message = std::move(message);
  return f;
}

// What the head says of the body, gathered line by line.
struct Seen {
  int lengths = 0, encodings = 0;
  std::string_view length, encoding;
};

// One header line; a refusal, or status 0 to go on.
Framing take_line(std::string_view line, Seen& seen) {
  if (!line.empty() && ows(line.front()))
    return refuse(400, "a header line folded onto the next (obsolete line folding)");
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return refuse(400, "a header line without a name and a colon");
  const std::string_view name = line.substr(0, colon);
  if (ows(name.back())) return refuse(400, "white space between a header name and its colon");
  const std::string_view value = trim(line.substr(colon + 1));
  if (ieq(name, "Content-Length")) {
    ++seen.lengths;
    seen.length = value;
  } else if (ieq(name, "Transfer-Encoding")) {
    ++seen.encodings;
    seen.encoding = value;
  }
  return {};
}

Framing judge_length(std::string_view v, std::size_t max_body, std::size_t& length) {
  if (v.empty() || v.size() > 19)
    return v.empty() ? refuse(400, "Content-Length is empty")
                     : refuse(413, "declared body over --max-body (" + std::to_string(max_body) +
                                       " bytes)");
  unsigned long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9')
      return refuse(400, "Content-Length '" + std::string(v) + "' is not a whole number");
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  if (n > max_body)
    return refuse(413, "declared body of " + std::to_string(n) + " bytes over --max-body (" +
                           std::to_string(max_body) + " bytes)");
  length = static_cast<std::size_t>(n);
  return {};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Framing judge_framing(std::string_view head, std::size_t max_body) {
  while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);  // empty lines before the request
  Seen seen;
  std::size_t at = head.find("\r\n");  // past the request line
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const std::size_t from = at + 2, to = head.find("\r\n", from);
    if (to == std::string_view::npos || to == from) break;  // the empty line ends the head
    if (Framing f = take_line(head.substr(from, to - from), seen); f.status) return f;
    at = to;
  }
  if (seen.lengths > 1) return refuse(400, "more than one Content-Length header");
  if (seen.encodings > 1) return refuse(400, "more than one Transfer-Encoding header");
  if (seen.lengths && seen.encodings)
    return refuse(400, "both Content-Length and Transfer-Encoding");
  if (seen.encodings && !ieq(seen.encoding, "chunked"))
    return refuse(
        400, "Transfer-Encoding '" + std::string(seen.encoding) + "': only 'chunked' is accepted");
  if (seen.lengths) {
    std::size_t n = 0;
    Framing f = judge_length(seen.length, max_body, n);
    f.length = n;
    return f;
  }
  Framing f;
  f.empty_body = !seen.encodings;
  f.chunked = seen.encodings != 0;
  return f;
}

void ChunkScan::feed(std::string_view body, std::size_t max_body) {
  auto fail = [&](int st, std::string why) {
    status = st;
    message = std::move(why);
  };
  while (!done && !status) {
    const std::size_t eol = body.find("\r\n", at);
    if (eol == std::string_view::npos) {
      if (body.size() - at > 4096) fail(400, "a chunk-size or trailer line over 4096 bytes");
      return;
    }
    const std::string_view line = body.substr(at, eol - at);
    if (trailers) {  // trailer lines until the empty one
      at = eol + 2;
      done = line.empty();
      continue;
    }
    std::size_t size = 0, i = 0;
    for (; i < line.size() && hex_digit(line[i]) >= 0; ++i) {
      if (size > (max_body >> 4)) return fail(413, "chunked body over --max-body");
      size = size * 16 + static_cast<std::size_t>(hex_digit(line[i]));
    }
    if (i == 0 || (i < line.size() && line[i] != ';' && !ows(line[i])))
      return fail(400, "a chunk size that is not hexadecimal");
    if (size == 0) {
      trailers = true;
      at = eol + 2;
      continue;
    }
    if (decoded + size > max_body) return fail(413, "chunked body over --max-body");
    const std::size_t data = eol + 2;
    if (body.size() < data + size + 2) return;  // the chunk's data is not all in yet
    if (body.substr(data + size, 2) != "\r\n") return fail(400, "chunk data not followed by CRLF");
    decoded += size;
    at = data + size + 2;
  }
}

}  // namespace lfs

// JSON request bodies (POST /api/streams, /finish) under the server's limits:
// a refusal is a 4xx HttpError; an accepted body is an object no deeper than
// the limit, and dumping it (recursive) is safe.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/app.hpp"
#include "http/guard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    nlohmann::json j = lfs::parse_json_request(body, 4096, 8, size % 2 == 0);
    if (!j.is_object()) std::abort();
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const lfs::HttpError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
  return 0;
}

// gzip for tests and fuzz targets: one helper instead of a copy in each
// (tests/hostile, tests/server/test_http.cpp, fuzz/fuzz_gzip_body.cpp).
#pragma once

#include <string>
#include <string_view>

namespace lft {

/// `in` as one complete gzip member (header, deflate data, CRC-32 and length)
/// at compression `level` (zlib's 0-9). Throws std::runtime_error if zlib fails.
std::string gzip(std::string_view in, int level = 9);

}  // namespace lft

// Query strings and the parameters read from them: parse_query, then every
// parameter reader the handlers use (numbers, times, tags, run names,
// Pyroscope's name{labels}, metrics). A refusal is a 4xx HttpError.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "http/app.hpp"
#include "http/guard.hpp"
#include "ingest/ingest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string target = "/api/runs?" + std::string(reinterpret_cast<const char*>(data), size);
  httplib::Request req;
  for (auto& kv : lfs::parse_query(target)) req.params.emplace(kv.first, kv.second);
  auto check = [](auto&& fn) {
    try {
      fn();
    } catch (const lfs::HttpError& e) {
      if (e.status < 400 || e.status >= 500) std::abort();
    }
  };
  check([&] { (void)lfs::int_param(req, "limit", 50, 1, 1000); });
  check([&] {
    int64_t t = lfs::time_param(req, "from", 0);
    if (t < 0) std::abort();
  });
  check([&] { (void)lfs::tag_params(req, "tag", 32); });
  check([&] { lfs::check_name(req.get_param_value("name")); });
  check([&] { (void)lfs::metric_param(req, nullptr); });
  check([&] { (void)lfs::parse_pyroscope_name(req.get_param_value("name")); });
  check([&] {
    (void)lfs::upload_metric(req.get_param_value("units"), req.get_param_value("metric"));
  });
  (void)lfs::log_safe(target);
  return 0;
}

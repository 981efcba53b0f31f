// The one error a request's processing throws to refuse it: a status and a
// JSON body. Apart from app.hpp so that what turns bodies into batches
// (ingest/) can refuse without knowing the server's state or routes.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace lfs {

/// A refusal with a status and a JSON body {"error": message, ...extra}.
struct HttpError : std::runtime_error {
  int status;
  nlohmann::json extra;
  HttpError(int st, const std::string& msg, nlohmann::json ex = nlohmann::json::object())
      : std::runtime_error(msg), status(st), extra(std::move(ex)) {}
};

/// The wire format's rules for a run name and a tag (lfw::name_error, tag_error) as
/// refusals: 400 with the reason (http_util.cpp). Every way in checks with these.
void check_name(const std::string& name);
void check_tag(const std::string& key, const std::string& value);

}  // namespace lfs

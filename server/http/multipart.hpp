// multipart/form-data request bodies (what the Go and Java Pyroscope agents
// send: parts "profile", "prev_profile", "sample_type_config"). httplib
// parses the parts; this reads them with the body size limit.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace lfs {

enum class MultipartRead { ok, too_big, bad };

/// Reads every part of a multipart body into `files` (name -> content,
/// filename, content type), at most `max_bytes` of part data in all.
MultipartRead read_multipart(const httplib::ContentReader& reader, std::size_t max_bytes,
                             httplib::MultipartFormDataMap& files);

/// The content of part `name`, or "" (found = false) when there is none.
std::string_view part(const httplib::Request& req, const std::string& name, bool* found = nullptr);

}  // namespace lfs

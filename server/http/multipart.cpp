// multipart/form-data bodies (see multipart.hpp).
#include "http/multipart.hpp"

namespace lfs {

MultipartRead read_multipart(const httplib::ContentReader& reader, std::size_t max_bytes,
                             httplib::MultipartFormDataMap& files) {
  std::size_t total = 0;
  bool too_big = false;
  httplib::MultipartFormData* current = nullptr;
  bool ok = reader(
      [&](const httplib::MultipartFormData& header) {
        // Part headers count against the limit too: many empty parts are no cheaper.
        total += header.name.size() + header.filename.size() + header.content_type.size() + 64;
        if (total > max_bytes) {
          too_big = true;
          return false;
        }
        current = &files.emplace(header.name, header)->second;
        current->content.clear();
        return true;
      },
      [&](const char* data, std::size_t n) {
        total += n;
        if (total > max_bytes || !current) {
          too_big = total > max_bytes;
          return false;
        }
        current->content.append(data, n);
        return true;
      });
  if (too_big) return MultipartRead::too_big;
  return ok ? MultipartRead::ok : MultipartRead::bad;
}

std::string_view part(const httplib::Request& req, const std::string& name, bool* found) {
  auto it = req.files.find(name);
  if (found) *found = it != req.files.end();
  if (it == req.files.end()) return {};
  return it->second.content;
}

}  // namespace lfs

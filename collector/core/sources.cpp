// Source texts for the server (see sources.hpp).
#include "core/sources.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace lfc {

void SourceFiles::note(const char* short_src, const char* source) {
  if (!short_src || !source || source[0] != '@') return;  // strings given to load(): no file
  std::lock_guard<std::mutex> lock(mu_);
  if (paths_.size() < 10000) paths_.emplace(short_src, source + 1);
}

std::string SourceFiles::json() const {
  std::map<std::string, std::string> paths;
  {
    std::lock_guard<std::mutex> lock(mu_);
    paths = paths_;
  }
  nlohmann::json files = nlohmann::json::object();
  std::size_t total = 0;
  for (const auto& [key, path] : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (text.size() > kMaxFileBytes || total + text.size() > kMaxTotalBytes) continue;
    // JSON strings are UTF-8: a file in another encoding is left out rather than mangled.
    nlohmann::json t = text;
    try {
      (void)t.dump();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    total += text.size();
    files[key] = std::move(text);
  }
  if (files.empty()) return "";
  return nlohmann::json{{"files", files}}.dump();
}

}  // namespace lfc

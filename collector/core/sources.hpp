// Opt-in shipping of the profiled program's source text (option `sources`),
// so the server can show a function's source with line heat (issue 17).
// Off by default: source may be private. Only files Lua loaded from disk
// ("@path" chunks) are sent, each up to kMaxFileBytes, kMaxTotalBytes in all.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace lfc {

class SourceFiles {
 public:
  static constexpr std::size_t kMaxFileBytes = 1u << 20;   // the server's limit per file
  static constexpr std::size_t kMaxTotalBytes = 8u << 20;  // half the server's limit per upload

  /// Notes the file of a newly seen Lua function: `short_src` is the key the
  /// frames use, `source` Lua's chunk name ("@path" for files). Called on the
  /// cold path of frame naming (a function's first sighting), on the Lua thread.
  void note(const char* short_src, const char* source);
  /// JSON {"files": {short_src: text}} of the noted files that can be read
  /// within the limits; "" when there is none. Reads the files now.
  std::string json() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> paths_;  // short_src -> path
};

}  // namespace lfc

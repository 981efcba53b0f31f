// lfplugin::load (plugin.hpp): the candidates of a library loaded on first
// use, and the first that answers.
#include "plugin/plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

namespace lfplugin {

namespace {

std::string dir_of(const char* file) {
  char buf[PATH_MAX];
  if (!file || !realpath(file, buf)) return "";
  std::string s(buf);
  const std::size_t slash = s.rfind('/');
  return slash == std::string::npos ? "" : s.substr(0, slash);
}

// The directories are those of the object this code is linked into
// (luaflame.so, a runner, the luaflame command, a test) and of the program.
std::vector<std::string> candidates(const char* file, const char* env) {
  std::vector<std::string> out;
  if (const char* path = secure_getenv(env); path && *path) out.emplace_back(path);
  Dl_info info{};
  std::vector<std::string> dirs;
  if (dladdr(reinterpret_cast<void*>(&candidates), &info) && info.dli_fname)
    dirs.push_back(dir_of(info.dli_fname));
  dirs.push_back(dir_of("/proc/self/exe"));
  for (const std::string& d : dirs) {
    if (d.empty()) continue;
    for (const char* rel : {".", "..", "../..", "../collector", "../../collector",
                            "../lib/luaflame", "../../luaflame"})
      out.push_back(d + "/" + (rel[1] ? std::string(rel) + "/" : "") + file);
  }
  return out;
}

}  // namespace

bool load(const char* file, const char* env, const char* entry, bool (*accept)(void* entry_fn),
          std::string& why) {
  std::string tried;
  for (const std::string& p : candidates(file, env)) {
    if (access(p.c_str(), R_OK) != 0) continue;
    void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* err = h ? nullptr : dlerror();  // it names p
    void* fn = h ? dlsym(h, entry) : nullptr;
    if (fn && accept(fn)) return true;
    tried = err ? err : p + ": not luaflame's " + entry + " (or another version of it)";
  }
  why = tried.empty()
            ? std::string(file) + " is not installed beside luaflame (" + env + " names it)"
            : tried;
  return false;
}

}  // namespace lfplugin

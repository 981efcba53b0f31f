// Libraries the collector and the `luaflame` command load on first use, so
// that a program that never needs them never maps them: the HTTP transport
// (http/transport.h, to stream) and the pprof writer (pprof/pprof_writer.h,
// to write a .pb.gz file). Each is a C table behind one versioned entry
// point; this finds the file and the entry, the caller checks the table.
#pragma once

#include <mutex>
#include <string>

namespace lfplugin {

/// Where `file` is looked for: the path in environment variable `env`
/// first (not in a setuid or setgid program: secure_getenv, since it names
/// code to load), then beside the code that asks and the program, in the
/// build tree (build/collector/ holds the libraries; modules sit in
/// build/collector/lua5.X and build/collector/vm/luajit, programs in
/// build/cli and build/tests/X) and in an installed tree (PREFIX/lib/luaflame/;
/// modules in PREFIX/lib/lua/5.X and PREFIX/lib/luaflame/lua5.1, programs in
/// PREFIX/bin: docker/install.sh). Each candidate that exists is opened
/// (RTLD_NOW | RTLD_LOCAL) and its `entry` handed to `accept`, which calls
/// it and keeps the table when its version is right; the first one accepted
/// ends the search. Never unloaded. False with `why`: what the last
/// candidate said, or that none exists.
bool load(const char* file, const char* env, const char* entry, bool (*accept)(void* entry_fn),
          std::string& why);

/// The table of version 1 that `entry` of `file` answers (a function
/// `const Table* entry(void)`), loaded by load() on the first call in the
/// process and kept; null with `why` (the same words at every call) when
/// none was found. One per Table type: the HTTP transport's, the pprof writer's.
template <class Table>
const Table* table(const char* file, const char* env, const char* entry, std::string& why) {
  static const Table* got = nullptr;
  static std::string failed;
  static std::once_flag once;
  std::call_once(once, [&] {
    load(
        file, env, entry,
        [](void* fn) {
          const Table* t = reinterpret_cast<const Table* (*)()>(fn)();
          if (!t || t->version != 1) return false;
          got = t;
          return true;
        },
        failed);
  });
  if (!got) why = failed;
  return got;
}

}  // namespace lfplugin

// Frame naming and interning: turns a running function into a frame number.
// Lua functions are keyed by the function itself (its prototype where the
// adapter can read it, `proto_of`; always its source and line defined), so
// one function is one frame whatever its call site, and two functions
// defined on one line are two frames; C functions by their address. Names come from loaded modules
// and globals (string.gsub, Parser.parse), else from the call site (a local's name), else <anon>.
// Functions whose frames read the same (two unnamed C functions, both
// "[C] <anon>") share one number: a stack is one node of the tree and one
// line of the folded text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/sources.hpp"
#include "core/text.hpp"
#include "core/tree.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

namespace foreign {
struct FrameCopy;
}

class FrameTable {
 public:
  explicit FrameTable(FrameNames& names) : names_(names) {}

  /// The frame of the function `ar` describes; `ar` must hold "S" info
  /// (and "l" when `leaf_line`). May call lua_getinfo "n"/"f" on `ar` and
  /// scan package.loaded the first time a function is seen. Hook-safe: raw
  /// accesses only, stack balanced, never raises.
  uint32_t of(lua_State* L, lua_Debug* ar, bool leaf_line = false);

  /// Gives a C function a fixed name ("[C] coroutine.resume").
  void preset(lua_CFunction f, const std::string& name);
  /// Names the C functions iterators and buffers are made of after their
  /// makers ("[C] ipairs iterator", "[C] buffer __close"). Calls Lua on a
  /// thread of its own with no hook: at start, not from a hook.
  void preset_makers(lua_State* L);
  /// Names the standard library's C functions after their own library
  /// ("[C] table.concat", "[C] load"), before any other module's alias of
  /// them can be seen first. Raw reads at start, not from a hook.
  void preset_stdlib(lua_State* L);
  /// The frame of a function the signal handler copied in foreign code
  /// (foreign.hpp); a C function not named yet gets `c_name` ("[C] __gc").
  /// Its name comes from its definition's text, never from Lua (the
  /// function is no longer on the stack). frames_copy.cpp.
  uint32_t of_copy(const foreign::FrameCopy& f, const char* c_name);
  /// Interns a synthetic frame by its text ("[alloc] table").
  uint32_t named(const std::string& text);
  /// True for C function frames.
  bool is_c(uint32_t id) const { return id < is_c_.size() && is_c_[id]; }
  /// When set (option `sources`), told the file of each newly seen Lua function.
  SourceFiles* sources = nullptr;
  /// Set by an adapter that can read it (its checked layout): the prototype
  /// of the Lua function `ar` describes (from lua_getstack on L or L's hook),
  /// null when unknown. Hook-safe (loads, and lua_getinfo "f" at most).
  /// Unset: functions are told apart by source and line only.
  const void* (*proto_of)(lua_State* L, lua_Debug* ar) = nullptr;
  std::size_t memory_bytes() const;

 private:
  void preset_lib(lua_State* L, int t, const char* lib);
  struct LuaKey {
    const void* src;
    int line;
    const void* proto = nullptr;  ///< proto_of's answer (of_copy: always null)
    bool operator==(const LuaKey& o) const {
      return src == o.src && line == o.line && proto == o.proto;
    }
  };
  struct LuaKeyHash {
    std::size_t operator()(const LuaKey& k) const {
      return (std::hash<const void*>()(k.src) * 31 + static_cast<std::size_t>(k.line)) * 31 +
             std::hash<const void*>()(k.proto);
    }
  };
  struct LuaEntry {
    std::string short_src;  ///< checked on every hit: a freed source's address may be reused
    uint32_t id;
  };
  uint32_t of_lua(lua_State* L, lua_Debug* ar, bool leaf_line);
  uint32_t of_c(lua_State* L, lua_Debug* ar);
  /// The number of a frame's text: the one it has already, else a new one.
  /// Only when a function is first seen (the caches above keep its number).
  uint32_t add(std::string text, bool c);
  /// The name on the line a function is defined at; false when the
  /// source's text cannot be read (then `name` is untouched). `several`:
  /// the line defines more than one function (its name is then not said).
  bool definition_name(const char* source, int line, std::string& name, bool& several);

  FrameNames& names_;
  std::unordered_map<LuaKey, LuaEntry, LuaKeyHash> lua_[2];  // [leaf_line]
  std::unordered_map<const void*, uint32_t> c_;
  std::unordered_map<LuaKey, LuaEntry, LuaKeyHash> copies_;  ///< of_copy's
  /// Every frame's number by its text (views of names_'s own strings,
  /// which never move once added).
  std::unordered_map<std::string_view, uint32_t> by_text_;
  std::vector<bool> is_c_;
  std::unordered_map<std::string, std::vector<std::string>>
      sources_;  ///< lines of each source read
};

/// The name a function's definition gives it, from the text of the line it
/// starts on: "local function f (", "function M.f(", "function o:m(",
/// "f = function(", "M.f = function(", "['f'] = function(" -> f, M.f, o:m,
/// M.f, f. A line-level scan: comments and strings are not told apart (as
/// the regular expressions it replaced did not). "" when the line names none.
std::string name_on_line(const std::string& text);

/// How many times the word `function` appears on a line (a line-level scan,
/// as name_on_line's).
int functions_on_line(const std::string& text);

/// Finds a name for the function at stack index `fidx` in package.loaded
/// ("string.gsub", "print") or one level into global tables ("Parser.parse").
/// Returns "" when none. Visits at most `budget` table entries.
std::string global_name(lua_State* L, int fidx, int budget = 5000);

}  // namespace lfc

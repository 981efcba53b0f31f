// Frames of foreign code (foreign.hpp): named at the hook from what the
// signal handler copied, since the functions are no longer on the stack.
#include <cstring>

#include "vm/lua/frames.hpp"
#include "vm/puc/foreign.hpp"

namespace lfc {

namespace {

constexpr std::size_t kIdSize = LUA_IDSIZE;

// lua_Debug.short_src of a source, as Lua's luaO_chunkid (lobject.c) makes it.
std::string chunk_id(std::string_view src) {
  if (!src.empty() && (src[0] == '=' || src[0] == '@')) {
    std::string_view rest = src.substr(1);
    if (src.size() <= kIdSize) return std::string(rest);
    if (src[0] == '=') return std::string(rest.substr(0, kIdSize - 1));
    return "..." + std::string(rest.substr(rest.size() - (kIdSize - 4)));
  }
  const std::size_t room = kIdSize - std::strlen("[string \"...\"]") - 1;
  const std::size_t nl = src.find('\n');
  if (src.size() < room && nl == std::string_view::npos)
    return "[string \"" + std::string(src) + "\"]";
  std::string_view head = src.substr(0, nl == std::string_view::npos ? src.size() : nl);
  if (head.size() > room) head = head.substr(0, room);
  return "[string \"" + std::string(head) + "...\"]";
}

}  // namespace

uint32_t FrameTable::of_copy(const foreign::FrameCopy& f, const char* c_name) {
  if (f.c) {
    auto it = c_.find(f.ident);
    return it != c_.end() ? it->second : named(c_name);
  }
  const LuaKey key{f.ident, f.line};
  const std::string src(f.text, f.len);
  std::string short_src = chunk_id(src);
  sanitize_frame(short_src);
  // A function the walks named already: its frame, when the text matches
  // (a freed source's address may be reused).
  auto it = lua_[0].find(key);
  if (it != lua_[0].end() && it->second.short_src == short_src) return it->second.id;
  auto cit = copies_.find(key);
  if (cit != copies_.end() && cit->second.short_src == short_src) return cit->second.id;
  std::string name;
  if (f.line == 0) {
    const std::size_t slash = short_src.rfind('/');
    name = slash == std::string::npos ? short_src : short_src.substr(slash + 1);
  } else if (!f.cut || src[0] == '@') {
    bool several = false;
    definition_name(src.c_str(), f.line, name, several);
  }
  if (name.empty()) name = "<anon>";
  const uint32_t id = add(name + " " + short_src + ":" + std::to_string(f.line), false);
  copies_[key] = LuaEntry{short_src, id};
  return id;
}

}  // namespace lfc

// The stack walk (stackwalk.hpp).
#include "vm/puc/stackwalk.hpp"

#include "core/tree.hpp"
#include "vm/lua/frames.hpp"
#include "vm/puc/coroutines.hpp"
#include "vm/puc/luaint.hpp"

namespace lfc {

bool StackWalker::walk(lua_State* L, std::vector<uint32_t>& out, lua_State* from_T,
                       const void* from_ci) {
  const std::vector<lua_State*>& chain = coroutines_.chain();
  out.clear();
  int at = -1;
  for (std::size_t i = chain.size(); i-- > 0;)
    if (chain[i] == L) {
      at = static_cast<int>(i);
      break;
    }
  int first = at < 0 ? 0 : at;
  if (from_T && from_T != L) {
    // The recorded thread must be one of L's resumers.
    if (at < 0) return false;
    first = -1;
    for (int i = at - 1; i >= 0; --i)
      if (chain[static_cast<std::size_t>(i)] == from_T) {
        first = i;
        break;
      }
    if (first < 0) return false;
  }
  lua_Debug ar;
  for (int t = first; t >= 0 && out.size() < kMaxDepth; --t) {
    lua_State* T = at < 0 ? L : chain[static_cast<std::size_t>(t)];
    const bool leaf = lines_ && out.empty();
    // 5.1's lua_Debug names a CallInfo by its index in the thread's array:
    // lua_getinfo must be asked on that thread. 5.2+ read the CallInfo itself.
    lua_State* via = LUA_VERSION_NUM >= 502 ? L : T;
    if (!lua_getstack(T, 0, &ar)) {
      if (T != from_T) continue;
      if (t > 0) return false;
      // The recorded CallInfo is at or below the top, so it was the base:
      // no function ran on the outermost thread when the signal came.
      if (!host_frame_) host_frame_ = frames_.named("[host] outside Lua");
      out.assign(1, host_frame_);
      return true;
    }
    if (ci_walk_ok_) {
      const void* top = luaint::ci_of(ar);
      if (T == from_T) {
        // The recorded CallInfo must still be on the stack (at or below the
        // top): a frame entered since is not the one the signal fell in.
        const void* c = top;
        while (c && c != from_ci) c = luaint::ci_prev(c);
        if (!c) return false;
        top = from_ci;
      }
      // Follow the CallInfo list directly: lua_getstack(level) costs O(level).
      for (const void* ci = top; ci && luaint::ci_prev(ci) && out.size() < kMaxDepth;
           ci = luaint::ci_prev(ci)) {
        luaint::set_ci(ar, ci);
        const bool line = leaf && out.empty();
        lua_getinfo(L, line ? "Sl" : "S", &ar);
        out.push_back(frames_.of(L, &ar, line));
      }
    } else {
      for (int level = 0; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
        const bool line = leaf && level == 0;
        lua_getinfo(via, line ? "Sl" : "S", &ar);
        out.push_back(frames_.of(via, &ar, line));
      }
    }
  }
  // The host's own C entry (lua.c's pmain, the runner) is not the program's.
  while (!out.empty() && frames_.is_c(out.back())) out.pop_back();
  if (out.size() >= kMaxDepth) out.push_back(frames_.named("[luaflame] truncated"));
  return true;
}

uint32_t StackWalker::path_node(const std::vector<uint32_t>& leaf_first) {
  uint32_t node = 0;
  for (std::size_t i = leaf_first.size(); i-- > 0;) node = tree_.child(node, leaf_first[i]);
  return node;
}

}  // namespace lfc

// The stack walk: the frames of a thread's stack and of its resumers'
// (the resume chain, Coroutines), as one call path of the tree. Used by
// the sample the armed hook takes (Sampling) and by the allocation
// profiler's samples (session_alloc.cpp). Internal.
//
// Threads: Lua thread only, inside a hook (the one-shot or luaflame's), so
// no event of the walked threads races with it; it calls lua_getstack and
// lua_getinfo (which may allocate: the hook sets the allocator's `busy`
// first) and is never run by the signal handler. Its state is the buffer
// it reuses (`scratch_`); what it reads (the chain, the frames, the layout
// flag) has its own owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" {
#include <lua.h>
}

namespace lfc {

class Coroutines;
class FrameTable;
class Tree;

class StackWalker {
 public:
  /// Frames kept per walk (leaf side); deeper stacks end in "[luaflame] truncated".
  static constexpr std::size_t kMaxDepth = 4000;

  /// `lines`: the leaf frame named with its current line (option `lines`);
  /// `ci_walk_ok`: CallInfo.previous may be followed (set at start).
  StackWalker(const Coroutines& coroutines, FrameTable& frames, Tree& tree, const bool& lines,
              const bool& ci_walk_ok)
      : coroutines_(coroutines),
        frames_(frames),
        tree_(tree),
        lines_(lines),
        ci_walk_ok_(ci_walk_ok) {}

  /// The frames of L's stack and its resumers', leaf first. With `from_T`,
  /// the walk starts at `from_ci` on thread from_T (a frame the signal or
  /// the allocator recorded): false, `out` undefined, when from_T is not
  /// in L's resume chain or from_ci no longer on from_T's stack. A frame
  /// recorded on the outermost thread with no function running (a host
  /// that embeds Lua was in its own code: luaflame attach) is the one frame
  /// "[host] outside Lua", not the stack the hook finds later.
  bool walk(lua_State* L, std::vector<uint32_t>& out, lua_State* from_T = nullptr,
            const void* from_ci = nullptr);
  /// The tree node of a call path given leaf first (created if new).
  uint32_t path_node(const std::vector<uint32_t>& leaf_first);
  /// walk() then path_node() through the reused buffer: false, `node`
  /// untouched, when the walk from (from_T, from_ci) fails (see walk).
  bool node(lua_State* L, uint32_t& node, lua_State* from_T = nullptr,
            const void* from_ci = nullptr) {
    if (!walk(L, scratch_, from_T, from_ci)) return false;
    node = path_node(scratch_);
    return true;
  }

  std::size_t memory_bytes() const { return scratch_.capacity() * sizeof(uint32_t); }

 private:
  const Coroutines& coroutines_;
  FrameTable& frames_;
  Tree& tree_;
  const bool& lines_;
  const bool& ci_walk_ok_;
  std::vector<uint32_t> scratch_;  ///< reused by node()
  uint32_t host_frame_ = 0;        ///< "[host] outside Lua", named when first met
};

}  // namespace lfc

// LuaJIT stacks into frames (jframes.hpp).
#include "vm/luajit/jframes.hpp"

#include <string>

namespace lfc::jit {

namespace {

constexpr std::size_t kMaxDepth =
    4096;  ///< frames per sample; deeper stacks end in a truncated frame

}  // namespace

void ResumeChain::enter(lua_State* L, lua_State* co) {
  if (chain_.empty() || chain_.back() != L) chain_.assign(1, L);
  chain_.push_back(co);
}

void ResumeChain::leave(lua_State* co) {
  if (!chain_.empty() && chain_.back() == co) chain_.pop_back();
}

std::size_t ResumeChain::resumers_of(lua_State* L, lua_State* const*& threads) const {
  std::size_t k = chain_.size();
  while (k > 0 && chain_[k - 1] != L) --k;
  threads = chain_.data();
  return k;
}

JFrames::JFrames(JRun& run, const ResumeChain& chain) : run_(run), chain_(chain) {
  const char* const kVm[] = {"[JIT]", "[interp]", "[C]", "[GC]", "[compiler]"};
  for (int i = 0; i < 5; ++i) vm_frame_[i] = run_.frames.named(kVm[i]);
}

void JFrames::name_wrappers(const void* resume_fn, const void* wrap_fn, lua_CFunction wrap_call) {
  resume_fn_ = resume_fn;
  wrap_fn_ = wrap_fn;
  wrap_call_ = wrap_call;
}

uint32_t JFrames::frame_at(lua_State* T, lua_Debug* ar, bool leaf) {
  // LuaJIT's built-ins written in Lua ("[builtin:len]", no line) are named as C functions.
  if (ar->what[0] != 'C' && ar->linedefined >= 0)
    return run_.frames.of(T, ar, leaf && run_.opt.lines);
  if (!lua_checkstack(T, 8) || !lua_getinfo(T, "f", ar)) return run_.frames.named("[C] ?");
  // Keyed by the function object: LuaJIT's built-ins share C handlers.
  const void* fn = lua_topointer(T, -1);
  auto it = c_frames_.find(fn);
  if (it != c_frames_.end()) {
    lua_pop(T, 1);
    return it->second;
  }
  std::string name;
  if (fn == resume_fn_)
    name = "coroutine.resume";
  else if (fn == wrap_fn_)
    name = "coroutine.wrap";
  else if (lua_tocfunction(T, -1) == wrap_call_)
    name = "<wrapped coroutine>";
  else
    name = global_name(T, lua_gettop(T));
  lua_pop(T, 1);
  if (name.empty() && lua_getinfo(T, "n", ar) && ar->name && *ar->name) name = ar->name;
  if (name.empty()) name = "<anon>";
  const uint32_t id = run_.frames.named("[C] " + name);
  if (c_frame_.size() <= id) c_frame_.resize(id + 1, 0);
  c_frame_[id] = 1;
  c_frames_.emplace(fn, id);
  return id;
}

void JFrames::walk(lua_State* L, std::vector<uint32_t>& out) {
  out.clear();
  // L and the threads that resumed it, innermost first.
  lua_State* const* chain = nullptr;
  const std::size_t k = chain_.resumers_of(L, chain);
  lua_State* only[1] = {L};
  lua_State* const* threads = k ? chain : only;
  std::size_t n = k ? k : 1;
  lua_Debug ar;
  for (std::size_t t = n; t-- > 0 && out.size() < kMaxDepth;) {
    lua_State* T = threads[t];
    for (int level = 0; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
      const bool leaf = out.empty() && run_.opt.lines;
      lua_getinfo(T, leaf ? "Sl" : "S", &ar);
      const uint32_t f = frame_at(T, &ar, leaf);
      if (f != kSkip) out.push_back(f);
    }
  }
  // The host's own C entry (the runner's pmain, a C caller) is not the program's.
  while (!out.empty() && is_c(out.back())) out.pop_back();
  if (out.size() >= kMaxDepth) out.push_back(run_.frames.named("[luaflame] truncated"));
}

uint32_t JFrames::path_node(const std::vector<uint32_t>& leaf_first) {
  uint32_t node = 0;
  for (std::size_t i = leaf_first.size(); i-- > 0;) node = run_.tree.child(node, leaf_first[i]);
  return node;
}

std::size_t JFrames::memory_bytes() const {
  return c_frames_.size() * (sizeof(void*) + sizeof(uint32_t) + 2 * sizeof(void*)) +
         c_frame_.capacity();
}

}  // namespace lfc::jit

// LuaJIT stacks into frames (jframes.hpp).
#include "vm/luajit/jframes.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace lfc::jit {

namespace {

constexpr std::size_t kMaxDepth =
    4096;                         ///< frames per sample; deeper stacks end in a truncated frame
constexpr int kMaxResumers = 64;  ///< threads followed through the host's links

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

bool JFrames::host_frame(const lua_Debug& ar, uint32_t& frame) {
  if (!host_source_ || !ar.source || std::strcmp(ar.source, host_source_) != 0) return false;
  const int line = ar.linedefined;
  if (line == HostLines::kSpawned) {  // under its spawner's "[C] ngx.thread.spawn" already
    frame = kSkip;
    return true;
  }
  const char* name = line == HostLines::kWrap      ? "[C] coroutine.wrap"
                     : line == HostLines::kWrapped ? "[C] <wrapped coroutine>"
                     : line >= HostLines::kSpawn   ? "[C] ngx.thread.spawn"
                                                   : "[C] coroutine.resume";
  frame = run_.frames.named(name);
  return true;
}

uint32_t JFrames::frame_at(lua_State* T, lua_Debug* ar, bool leaf) {
  if (uint32_t f = 0; host_frame(*ar, f)) return f;
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
  else if (wrap_call_ && lua_tocfunction(T, -1) == wrap_call_)
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

// Contract: on the Lua thread, where the API may read L (the profiler's
// callback). The links table is weak in keys and values: the collector
// clears an entry before it frees either thread, so a thread read from it
// is whole. Each one read stays on L's stack, so that a collection step
// during the walk (naming a new C function pushes a string) cannot free
// it: the caller restores L's top after the walk (JSampler::on_samples).
std::size_t JFrames::host_resumers(lua_State* L, lua_State* const*& threads, uint32_t& base) {
  hosted_.assign(1, L);
  threads = hosted_.data();
  base = 0;
  if (links_ref_ < 0 || !lua_checkstack(L, kMaxResumers + 4)) return 1;
  const int links = lua_gettop(L) + 1, firsts = links + 1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, links_ref_);
  lua_rawgeti(L, LUA_REGISTRYINDEX, firsts_ref_);
  lua_pushthread(L);
  for (int i = 0; i < kMaxResumers; ++i) {
    // A link holds while its thread runs the function it was made for: a
    // host that recycles threads (ngx_lua's thread cache gives a finished
    // coroutine to the next request) runs another on it later.
    lua_pushvalue(L, -1);
    lua_rawget(L, firsts);
    const void* first = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (!first || first != first_function(hosted_.back())) break;
    lua_pushvalue(L, -1);
    lua_rawget(L, links);  // links[thread]: its resumer (or nil) above the thread, kept
    if (lua_type(L, -1) == LUA_TNUMBER) {  // a spawned thread: its spawner's node
      const lua_Number node = lua_tonumber(L, -1);
      if (node > 0 && node < static_cast<lua_Number>(run_.tree.size()))
        base = static_cast<uint32_t>(node);
      break;
    }
    lua_State* r = lua_tothread(L, -1);
    if (!r || std::find(hosted_.begin(), hosted_.end(), r) != hosted_.end()) break;
    hosted_.push_back(r);
  }
  std::reverse(hosted_.begin(), hosted_.end());
  threads = hosted_.data();
  return hosted_.size();
}

const void* JFrames::first_function(lua_State* T) {
  lua_Debug ar;
  if (!lua_getstack(T, 0, &ar))  // not started: the function is its stack's first value
    return lua_gettop(T) >= 1 && lua_isfunction(T, 1) ? lua_topointer(T, 1) : nullptr;
  int lo = 0, hi = 1;  // a frame at lo, none known at hi
  while (hi < (1 << 20) && lua_getstack(T, hi, &ar)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (lua_getstack(T, mid, &ar) ? lo : hi) = mid;
  }
  if (!lua_getstack(T, lo, &ar) || !lua_checkstack(T, 1) || !lua_getinfo(T, "f", &ar))
    return nullptr;
  const void* fn = lua_topointer(T, -1);
  lua_pop(T, 1);
  return fn;
}

bool JFrames::is_spawned_wrapper(const lua_Debug& ar) const {
  return host_source_ && ar.linedefined == HostLines::kSpawned && ar.source &&
         std::strcmp(ar.source, host_source_) == 0;
}

// The wrapper a spawned thread starts in (jhost.cpp) links the thread
// when it calls `link`; a sample before that reads the node from the
// wrapper's upvalue `node`.
uint32_t JFrames::pending_spawn(lua_State* T, lua_Debug& ar) {
  if (!lua_checkstack(T, 2) || !lua_getinfo(T, "f", &ar)) return 0;
  uint32_t node = 0;
  for (int i = 1;; ++i) {
    const char* name = lua_getupvalue(T, -1, i);
    if (!name) break;
    const bool hit = std::strcmp(name, "node") == 0;
    const lua_Number v = lua_type(T, -1) == LUA_TNUMBER ? lua_tonumber(T, -1) : 0;
    lua_pop(T, 1);
    if (!hit) continue;
    if (v > 0 && v < static_cast<lua_Number>(run_.tree.size())) node = static_cast<uint32_t>(v);
    break;
  }
  lua_pop(T, 1);
  return node;
}

// A resumer through the host's resume is suspended inside it: the wrapper
// tail-called it, so its top frame is the host's C function (ngx_lua's
// resume, or LuaJIT's own outside a request), shown as coroutine.resume,
// or a wrapped coroutine's function (a C closure over the coroutine).
bool JFrames::walk_resumer(lua_State* T, std::vector<uint32_t>& out) {
  lua_Debug ar;
  if (!lua_getstack(T, 0, &ar) || !lua_checkstack(T, 2)) return false;
  const int top = lua_gettop(T);
  lua_getinfo(T, "Sf", &ar);  // pushes the function
  const bool c = ar.what[0] == 'C';
  const bool wrapped = c && lua_getupvalue(T, -1, 1) && lua_isthread(T, -1);
  lua_settop(T, top);
  if (!c) return false;
  out.push_back(run_.frames.named(wrapped ? "[C] <wrapped coroutine>" : "[C] coroutine.resume"));
  for (int level = 1; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
    lua_getinfo(T, "S", &ar);
    const uint32_t f = frame_at(T, &ar, false);
    if (f != kSkip) out.push_back(f);
  }
  return true;
}

uint32_t JFrames::walk(lua_State* L, std::vector<uint32_t>& out) {
  out.clear();
  // L and the threads that resumed it, outermost first: through our
  // resume (the chain), else through the host's (the links).
  lua_State* const* threads = nullptr;
  uint32_t base = 0;
  std::size_t n = chain_.resumers_of(L, threads);
  const bool hosted = n == 0;
  if (hosted) n = host_resumers(L, threads, base);
  lua_Debug ar;
  for (std::size_t t = n; t-- > 0 && out.size() < kMaxDepth;) {
    lua_State* T = threads[t];
    if (hosted && t + 1 < n) {
      if (!walk_resumer(T, out)) break;
      continue;
    }
    int spawned_at = -1;  // the level of a spawned thread's wrapper, before its link
    for (int level = 0; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
      const bool leaf = out.empty() && run_.opt.lines;
      lua_getinfo(T, leaf ? "Sl" : "S", &ar);
      spawned_at = is_spawned_wrapper(ar) ? level : -1;
      const uint32_t f = frame_at(T, &ar, leaf);
      if (f != kSkip) out.push_back(f);
    }
    if (spawned_at >= 0 && t + 1 == n && base == 0 && lua_getstack(T, spawned_at, &ar))
      base = pending_spawn(T, ar);
  }
  // The host's own C entry (the runner's pmain, a C caller) is not the program's.
  while (!out.empty() && is_c(out.back())) out.pop_back();
  if (out.size() >= kMaxDepth) out.push_back(run_.frames.named("[luaflame] truncated"));
  return base;
}

uint32_t JFrames::path_node(const std::vector<uint32_t>& leaf_first, uint32_t from) {
  uint32_t node = from;
  for (std::size_t i = leaf_first.size(); i-- > 0;) node = run_.tree.child(node, leaf_first[i]);
  return node;
}

std::size_t JFrames::memory_bytes() const {
  return c_frames_.size() * (sizeof(void*) + sizeof(uint32_t) + 2 * sizeof(void*)) +
         c_frame_.capacity();
}

}  // namespace lfc::jit

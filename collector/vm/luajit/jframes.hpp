// The LuaJIT adapter's frames: its run (the core's Profile with the frame
// table every Lua shares), the resume chain its coroutine wrappers keep,
// and how a LuaJIT stack becomes frames (C functions keyed by their
// function object, the VM states' frames, the walk across resumers).
// Lua thread only; the streamer thread only reads the run's tree.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/profile.hpp"
#include "vm/lua/frames.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

/// The run and its frame table.
struct JRun : Profile {
  explicit JRun(const Options& o) : Profile(o, vm_release()) {
    if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
    tree.overflow_frame = frames.named("[luaflame] too many stacks");
  }
  FrameTable frames{names};
};

/// Which thread resumed which (LuaJIT's stack walk sees one coroutine):
/// kept by the coroutine.resume/wrap wrappers; the last one runs.
class ResumeChain {
 public:
  void start(lua_State* L) { chain_.assign(1, L); }
  /// L resumes co (a resume from a thread not on the chain starts it over).
  void enter(lua_State* L, lua_State* co);
  /// co gave control back.
  void leave(lua_State* co);
  /// The running thread, or `fallback` before any.
  lua_State* running(lua_State* fallback) const {
    return chain_.empty() ? fallback : chain_.back();
  }
  /// L and the threads that resumed it, outermost first; {} when L is not on it.
  std::size_t resumers_of(lua_State* L, lua_State* const*& threads) const;

 private:
  std::vector<lua_State*> chain_;
};

/// Frames of LuaJIT stacks.
class JFrames {
 public:
  /// frame_at's answer for a frame that is not shown: the original coroutine.resume our wrappers
  /// call.
  static constexpr uint32_t kSkip = 0xffffffffu;
  /// The VM states LuaJIT's profiler reports, by vm_index.
  enum Vm { kJit, kInterp, kC, kGc, kCompiler };

  JFrames(JRun& run, const ResumeChain& chain);
  /// The frame of the function at ar (lua_getinfo "S" done), or kSkip.
  uint32_t frame_at(lua_State* L, lua_Debug* ar, bool leaf);
  /// L's frames leaf first, then its resumers' (the resume chain); may
  /// leave values on L's stack: the caller restores its top. Returns the
  /// node they hang under: the root, or for a thread the host spawned
  /// (ngx.thread.spawn, wrapped) the node of its spawner's stack then.
  uint32_t walk(lua_State* L, std::vector<uint32_t>& out);
  /// The node of a stack given leaf first, under `from`.
  uint32_t path_node(const std::vector<uint32_t>& leaf_first, uint32_t from = 0);
  uint32_t vm(Vm v) const { return vm_frame_[v]; }
  /// The function object `fn` is never shown (the original resume).
  void skip(const void* fn) { c_frames_[fn] = kSkip; }
  /// Our coroutine wrappers, named as the 5.4 collector names them.
  void name_wrappers(const void* resume_fn, const void* wrap_fn, lua_CFunction wrap_call);
  /// A host's coroutine.resume and coroutine.wrap wrapped in Lua
  /// (jhost.cpp): `links_ref` is the registry's table of which thread
  /// resumed which (or the node a spawned thread hangs under), `firsts_ref`
  /// each such thread's first function then, `source` the wrappers' chunk name; its functions are
  /// told by the line they are defined on (HostLines), and shown as the
  /// functions they stand for. A resumer's top frame (the host's resume or
  /// a wrapped coroutine's function, tail-called) is shown so too.
  void host_resume(int links_ref, int firsts_ref, const char* source) {
    links_ref_ = links_ref;
    firsts_ref_ = firsts_ref;
    host_source_ = source;
  }
  /// The function T's outermost frame runs (the one it was made with),
  /// or for a thread not started the function it will run; null when none.
  static const void* first_function(lua_State* T);
  /// The lines the wrappers' chunk defines its functions on (checked
  /// against the loaded chunk before it is installed).
  struct HostLines {
    static constexpr int kResume = 2, kWrap = 6, kWrapped = 10, kSpawn = 15, kSpawned = 19;
  };
  const void* resume_fn() const { return resume_fn_; }
  const void* wrap_fn() const { return wrap_fn_; }
  std::size_t memory_bytes() const;
  /// Frame f is a C function's.
  bool is_c(uint32_t f) const { return f < c_frame_.size() && c_frame_[f]; }

 private:
  /// The frame of one of the host wrappers' functions (`ar` with "S"), or false.
  bool host_frame(const lua_Debug& ar, uint32_t& frame);
  /// L and the threads that resumed it through the host's resume,
  /// outermost first (hosted_), from the links table; leaves them on L's
  /// stack (anchored), for the caller to pop. `base`: the node of the
  /// outermost one's spawner (a number in the links), else the root.
  std::size_t host_resumers(lua_State* L, lua_State* const*& threads, uint32_t& base);
  /// A resumer T's frames, its top the host's resume, or none when T is
  /// not inside a resume (a link left from an earlier one): false.
  bool walk_resumer(lua_State* T, std::vector<uint32_t>& out);
  /// `ar` ("S" done) is the function a spawned thread starts in (jhost.cpp).
  bool is_spawned_wrapper(const lua_Debug& ar) const;
  /// The node in that function's upvalue `node` (ar: its frame), or 0.
  uint32_t pending_spawn(lua_State* T, lua_Debug& ar);

  JRun& run_;
  const ResumeChain& chain_;
  uint32_t vm_frame_[5] = {};                           ///< [JIT] [interp] [C] [GC] [compiler]
  std::unordered_map<const void*, uint32_t> c_frames_;  ///< C functions by GCfunc address
  std::vector<char> c_frame_;                           ///< frame id -> is a C function
  const void* resume_fn_ = nullptr;
  const void* wrap_fn_ = nullptr;
  lua_CFunction wrap_call_ = nullptr;  ///< the C function of every coroutine.wrap result
  int links_ref_ = -2;                 ///< host_resume's table, or none
  int firsts_ref_ = -2;                ///< each linked thread's first function when linked
  const char* host_source_ = nullptr;  ///< host_resume's chunk name
  std::vector<lua_State*> hosted_;     ///< host_resumers' answer
};

}  // namespace lfc::jit

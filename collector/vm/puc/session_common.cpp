// The session's construction and the process-wide session pointer that
// the hooks, the allocator and the signal handler read (session.hpp).
#include "vm/puc/alloc.hpp"
#include "vm/puc/session.hpp"

namespace lfc {

std::atomic<Session*> g_session{nullptr};

Session::Session(lua_State* L, const Options& o) : Profile(o, vm_release()), start_L(L), main_L(L) {
  if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
  tree.overflow_frame = frames.named("[luaflame] too many stacks");
}

Session::~Session() = default;  // alloc.hpp included: AllocState is complete

}  // namespace lfc

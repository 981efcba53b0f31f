// Coroutine tracking (coroutines.hpp: the contract): the resume chain and
// the running thread. The wrappers that tell it of each switch
// (coroutine.resume / coroutine.wrap, a host's lua_resume) are the
// session's: session_coroutines.cpp.
#include "vm/puc/coroutines.hpp"

#include "vm/puc/hookchain.hpp"

namespace lfc {

uint64_t thread_serial() noexcept {
  static std::atomic<uint64_t> last{0};
  thread_local uint64_t mine = 0;
  if (!mine) mine = last.fetch_add(1, std::memory_order_relaxed) + 1;
  return mine;
}

void Coroutines::start(lua_State* L) {
  owner_ = thread_serial();
  chain_.push_back(L);
  current_.store(L);
}

void Coroutines::enter(lua_State* co, HookChain& hooks) {
  chain_.push_back(co);
  current_.store(co, std::memory_order_relaxed);
  if (hooks.armed()) hooks.disarm(), hooks.arm();  // the pending sample belongs to what runs now
}

void Coroutines::leave(lua_State* L, lua_State* co, HookChain& hooks) {
  if (!chain_.empty() && chain_.back() == co)
    chain_.pop_back();
  else
    for (std::size_t i = chain_.size(); i-- > 0;)
      if (chain_[i] == co) {
        chain_.erase(chain_.begin() + i);
        break;
      }
  if (chain_.empty()) chain_.push_back(L);
  current_.store(chain_.back(), std::memory_order_relaxed);
  if (hooks.armed_on(co)) hooks.disarm(), hooks.arm();
}

}  // namespace lfc

// The allocation profiler (issue 7). Placeholder until written.
#include "alloc.hpp"
#include "session.hpp"
#include "streamer.hpp"

namespace lfc {

Session::~Session() = default;  // here, where AllocState is complete

bool Session::start_alloc(std::string& err) {
  err = "mode 'alloc' is not available yet";
  return false;
}
void Session::take_alloc(lua_State*) {}
void Session::stop_alloc(lua_State*) {}

}  // namespace lfc

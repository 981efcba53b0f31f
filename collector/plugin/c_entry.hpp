// What the C entry points of the libraries loaded on first use
// (http/transport.cpp, pprof/writer.cpp) share: nothing C++ crosses them,
// so each catches every exception and hands back words instead.
#pragma once

#include <cstring>
#include <exception>
#include <string_view>

namespace lfplugin {

/// `text` into to[cap], cut to fit and NUL-terminated (nothing when cap is 0).
inline void put_text(char* to, std::size_t cap, std::string_view text) noexcept {
  if (!to || !cap) return;
  const std::size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
  std::memcpy(to, text.data(), n);
  to[n] = '\0';
}

/// f()'s answer; when it throws, `failed`, with the exception's words (or
/// `unknown`) in why[cap].
template <class R, class F>
R guarded(char* why, std::size_t cap, const char* unknown, R failed, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    put_text(why, cap, e.what());
  } catch (...) {
    put_text(why, cap, unknown);
  }
  return failed;
}

}  // namespace lfplugin

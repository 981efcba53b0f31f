// Helpers for the hostile-input tests: raw HTTP over sockets (from any
// 127.0.0.0/8 source address), the server's memory from /proc, and the
// prompt-/healthz check every test ends with.
#pragma once

#include <sys/types.h>

#include <string>

#include "gzip.hpp"
#include "harness.hpp"

namespace lfh {

/// A connection to 127.0.0.1:port from source address `from` (127.x.y.z), or -1.
int connect_from(int port, const std::string& from = "127.0.0.1");
/// Writes all of `data` (false when the peer closed).
bool send_all(int fd, const std::string& data);
/// Reads until the peer closes or `timeout_ms` passes.
std::string read_all(int fd, int timeout_ms);
/// Sends `request` on a new connection and returns what came back within `timeout_ms`.
std::string exchange(int port, const std::string& request, int timeout_ms = 10000);
/// The status code of the first response in `raw`, or 0.
int status_of(const std::string& raw);

/// The server's resident set now and its peak (VmRSS, VmHWM), bytes.
long rss_bytes(pid_t pid);
long peak_rss_bytes(pid_t pid);
/// Resets the peak (VmHWM) to the current RSS (/proc/PID/clear_refs 5).
void reset_peak(pid_t pid);

/// `ms` times LUAFLAME_TEST_TIME_FACTOR (when set above 1: sanitizer builds).
long scaled_ms(long ms);
/// GET /healthz must answer 200 within scaled_ms(ms) milliseconds (checked with doctest).
void check_healthz_prompt(const lft::ServerProc& s, int ms = 1000);

/// gzip of `in` (one member): the shared test helper.
using lft::gzip;

}  // namespace lfh

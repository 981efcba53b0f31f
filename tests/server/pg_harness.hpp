// A real PostgreSQL for the tests, started by the tests themselves: initdb and
// pg_ctl into a temporary folder, as an unprivileged user when run as root
// (`postgres`, else `nobody`), listening on a free 127.0.0.1 port only, and
// stopped at the end. A watchdog process stops it and removes the folder if
// the test program dies first (kill -9, a timeout), so nothing is left running.
#pragma once

#include <string>

namespace lft {

/// The folder of PostgreSQL's programs (initdb, pg_ctl, postgres): $LUAFLAME_PG_BINDIR, else
/// the newest /usr/lib/postgresql/N/bin. "" when none is installed (or $LUAFLAME_PG_BINDIR
/// has no initdb).
std::string pg_bindir();

/// Whether the environment is CI (CI=true): there PostgreSQL must be installed and a test that
/// needs it fails rather than skips.
bool in_ci();

/// Cases of this program that could not run here (a tool is missing): when
/// any did and none failed, the program exits 77, which CTest shows as skipped.
int& skipped_cases();

/// The test's PostgreSQL, started at the first call (throws when it cannot start).
class Postgres {
 public:
  static Postgres& shared();
  /// A new, empty database; returns its URL (postgresql://luaflame@127.0.0.1:PORT/NAME).
  std::string new_database();
  int port() const { return port_; }
  ~Postgres();

 private:
  Postgres();
  std::string dir_;
  int port_ = 0;
  int watchdog_fd_ = -1;  // its other end is held by the watchdog: closed = stop PostgreSQL
  int watchdog_pid_ = -1;
  int databases_ = 0;
};

/// main() of a test program that needs PostgreSQL: runs doctest when the binaries are there;
/// otherwise exits 77 (CTest's SKIP_RETURN_CODE) with the reason, or 1 in CI.
int run_pg_tests(int argc, char** argv);

}  // namespace lft

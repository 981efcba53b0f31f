// A thin C++ layer over libpq for PgStore: connections, parameterised queries
// (values are never spliced into SQL text: no injection), binary arrays for
// bulk writes through unnest(), results, and a pool of connections.
#pragma once

#include <libpq-fe.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lfs::pg {

/// A failed query or connection; `sqlstate` is PostgreSQL's error code ("40P01", ...).
struct Error : std::runtime_error {
  std::string sqlstate;
  Error(const std::string& msg, std::string state)
      : std::runtime_error(msg), sqlstate(std::move(state)) {}
};

/// A query result (owns the PGresult).
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* r) : r_(r, PQclear) {}
  int rows() const { return r_ ? PQntuples(r_.get()) : 0; }
  bool null(int row, int col) const { return PQgetisnull(r_.get(), row, col); }
  /// Text-format columns.
  std::string_view text(int row, int col) const;
  int64_t i64(int row, int col) const;
  double dbl(int row, int col) const;
  /// Binary-format columns (results asked for with binary=true).
  std::string_view bytes(int row, int col) const { return text(row, col); }
  int64_t bin_i64(int row, int col) const;
  double bin_dbl(int row, int col) const;
  /// Rows changed by an INSERT/UPDATE/DELETE.
  int64_t affected() const;

 private:
  std::shared_ptr<PGresult> r_;
};

/// Parameters of one query: each is text, or binary with a type OID.
class Params {
 public:
  Params& add(std::string_view text);
  Params& add(int64_t v);
  Params& add(int v) { return add(static_cast<int64_t>(v)); }
  Params& add(double v);
  Params& null();
  /// bytea, sent as binary.
  Params& bytea(std::string_view v);
  /// One-dimensional arrays, sent in PostgreSQL's binary array format.
  Params& array(const std::vector<int64_t>& v);
  Params& array(const std::vector<int32_t>& v);
  Params& array(const std::vector<double>& v);
  /// text[] (`bytea_elems` false) or bytea[] (true).
  Params& array(const std::vector<std::string_view>& v, bool bytea_elems);

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const;
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }
  const unsigned* types() const { return types_.data(); }

 private:
  Params& push(std::string bytes, int format, unsigned type, bool is_null = false);
  std::vector<std::string> values_;
  std::vector<bool> nulls_;
  std::vector<int> lengths_, formats_;
  std::vector<unsigned> types_;
  mutable std::vector<const char*> ptrs_;
};

/// One connection. Statements are prepared once per connection by name.
class Conn {
 public:
  explicit Conn(const std::string& conninfo);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  /// Runs SQL without parameters (several statements allowed).
  void exec(const char* sql);
  /// Runs `sql` with `p` through a statement prepared on first use under `name`.
  /// `binary`: results in binary format.
  Result query(const char* name, const char* sql, const Params& p = Params(), bool binary = false);
  /// Runs one-off SQL with parameters (not prepared).
  Result query_once(const std::string& sql, const Params& p, bool binary = false);
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }
  /// True when not inside a transaction block (safe to give back to the pool).
  bool idle() const { return PQtransactionStatus(c_) == PQTRANS_IDLE; }
  PGconn* raw() { return c_; }

 private:
  Result check(PGresult* r, const char* what);
  PGconn* c_ = nullptr;
  std::vector<std::string> prepared_;
};

/// BEGIN on construction; ROLLBACK unless commit() was called.
class Txn {
 public:
  explicit Txn(Conn& c, const char* begin = "BEGIN") : c_(c) { c_.exec(begin); }
  ~Txn();
  void commit();

 private:
  Conn& c_;
  bool done_ = false;
};

/// Connections made on demand, kept for reuse (at most `keep`); close() waits
/// until every borrowed one is given back.
class Pool {
 public:
  /// `setup`: SQL run on each new connection ("" = none).
  Pool(std::string conninfo, std::size_t keep, std::string setup = "")
      : conninfo_(std::move(conninfo)), setup_(std::move(setup)), keep_(keep) {}
  ~Pool() { close(); }

  /// A connection for one call, given back on destruction (dropped when broken
  /// or left inside a transaction).
  class Lease {
   public:
    Lease(Pool& p) : pool_(p), conn_(p.borrow()) {}
    ~Lease() { pool_.give_back(std::move(conn_)); }
    Conn& operator*() { return *conn_; }
    Conn* operator->() { return conn_.get(); }

   private:
    Pool& pool_;
    std::unique_ptr<Conn> conn_;
  };

  /// A new connection outside the pool (the caller owns it).
  std::unique_ptr<Conn> connect() {
    auto c = std::make_unique<Conn>(conninfo_);
    if (!setup_.empty()) c->exec(setup_.c_str());
    return c;
  }
  void close();

 private:
  std::unique_ptr<Conn> borrow();
  void give_back(std::unique_ptr<Conn> c);
  std::string conninfo_, setup_;
  std::size_t keep_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::size_t out_ = 0;
  bool closed_ = false;
};

/// `url` with its password (if any) replaced by "***", for logs and messages.
std::string redact(const std::string& url);

}  // namespace lfs::pg

#include "store/postgres/pg_client.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace lfs::pg {
namespace {

// Type OIDs (pg_type.dat; stable across PostgreSQL versions).
constexpr unsigned kInt4 = 23, kInt8 = 20, kFloat8 = 701, kText = 25, kBytea = 17;
constexpr unsigned kInt4Array = 1007, kInt8Array = 1016, kFloat8Array = 1022, kTextArray = 1009,
                   kByteaArray = 1001;

void put32(std::string& out, uint32_t v) {
  v = htonl(v);
  out.append(reinterpret_cast<const char*>(&v), 4);
}

void put64(std::string& out, uint64_t v) {
  put32(out, static_cast<uint32_t>(v >> 32));
  put32(out, static_cast<uint32_t>(v));
}

uint64_t get64(const char* p) {
  uint32_t hi, lo;
  std::memcpy(&hi, p, 4);
  std::memcpy(&lo, p + 4, 4);
  return (static_cast<uint64_t>(ntohl(hi)) << 32) | ntohl(lo);
}

// The binary array format (array_send in arrayfuncs.c): ndim, has-nulls flag,
// element type, then per dimension its length and lower bound, then each
// element as a length and its bytes.
std::string array_header(unsigned elem, std::size_t n) {
  std::string out;
  put32(out, n ? 1 : 0);
  put32(out, 0);
  put32(out, elem);
  if (n) {
    put32(out, static_cast<uint32_t>(n));
    put32(out, 1);
  }
  return out;
}

std::string state_of(const PGresult* r) {
  const char* s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return s ? s : "";
}

}  // namespace

std::string_view Result::text(int row, int col) const {
  return {PQgetvalue(r_.get(), row, col),
          static_cast<std::size_t>(PQgetlength(r_.get(), row, col))};
}

int64_t Result::i64(int row, int col) const {
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}

double Result::dbl(int row, int col) const {
  return std::strtod(PQgetvalue(r_.get(), row, col), nullptr);
}

int64_t Result::bin_i64(int row, int col) const {
  return static_cast<int64_t>(get64(PQgetvalue(r_.get(), row, col)));
}

double Result::bin_dbl(int row, int col) const {
  uint64_t bits = get64(PQgetvalue(r_.get(), row, col));
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

int64_t Result::affected() const {
  const char* n = r_ ? PQcmdTuples(r_.get()) : "";
  return *n ? std::strtoll(n, nullptr, 10) : 0;
}

Params& Params::push(std::string bytes, int format, unsigned type, bool is_null) {
  lengths_.push_back(static_cast<int>(bytes.size()));
  values_.push_back(std::move(bytes));
  nulls_.push_back(is_null);
  formats_.push_back(format);
  types_.push_back(type);
  return *this;
}

Params& Params::add(std::string_view text) {
  return push(std::string(text), 0, kText);
}
Params& Params::add(int64_t v) {
  std::string b;
  put64(b, static_cast<uint64_t>(v));
  return push(std::move(b), 1, kInt8);
}
Params& Params::add(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  std::string b;
  put64(b, bits);
  return push(std::move(b), 1, kFloat8);
}
Params& Params::null() {
  return push({}, 0, 0, true);
}
Params& Params::bytea(std::string_view v) {
  return push(std::string(v), 1, kBytea);
}

Params& Params::array(const std::vector<int64_t>& v) {
  std::string b = array_header(kInt8, v.size());
  for (int64_t x : v) {
    put32(b, 8);
    put64(b, static_cast<uint64_t>(x));
  }
  return push(std::move(b), 1, kInt8Array);
}

Params& Params::array(const std::vector<int32_t>& v) {
  std::string b = array_header(kInt4, v.size());
  for (int32_t x : v) {
    put32(b, 4);
    put32(b, static_cast<uint32_t>(x));
  }
  return push(std::move(b), 1, kInt4Array);
}

Params& Params::array(const std::vector<double>& v) {
  std::string b = array_header(kFloat8, v.size());
  for (double x : v) {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    put32(b, 8);
    put64(b, bits);
  }
  return push(std::move(b), 1, kFloat8Array);
}

Params& Params::array(const std::vector<std::string_view>& v, bool bytea_elems) {
  std::string b = array_header(bytea_elems ? kBytea : kText, v.size());
  for (std::string_view s : v) {
    put32(b, static_cast<uint32_t>(s.size()));
    b.append(s);
  }
  return push(std::move(b), 1, bytea_elems ? kByteaArray : kTextArray);
}

const char* const* Params::values() const {
  ptrs_.resize(values_.size());
  for (std::size_t i = 0; i < values_.size(); ++i)
    ptrs_[i] = nulls_[i] ? nullptr : values_[i].data();
  return ptrs_.data();
}

Conn::Conn(const std::string& conninfo) {
  c_ = PQconnectdb(conninfo.c_str());
  if (PQstatus(c_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c_);
    PQfinish(c_);
    c_ = nullptr;
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw Error("store: cannot connect to PostgreSQL: " + msg, "08001");
  }
  // Notices (e.g. "relation already exists, skipping") are not errors: keep them out of stderr.
  PQsetNoticeProcessor(
      c_, [](void*, const char*) {}, nullptr);
}

Conn::~Conn() {
  if (c_) PQfinish(c_);
}

Result Conn::check(PGresult* r, const char* what) {
  auto st = PQresultStatus(r);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Result(r);
  std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(c_);
  std::string state = state_of(r);
  PQclear(r);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  throw Error(std::string("store: ") + what + ": " + msg, state);
}

void Conn::exec(const char* sql) {
  check(PQexec(c_, sql), "query");
}

Result Conn::query(const char* name, const char* sql, const Params& p, bool binary) {
  if (std::find(prepared_.begin(), prepared_.end(), name) == prepared_.end()) {
    check(PQprepare(c_, name, sql, p.size(), p.types()), name);
    prepared_.emplace_back(name);
  }
  return check(
      PQexecPrepared(c_, name, p.size(), p.values(), p.lengths(), p.formats(), binary ? 1 : 0),
      name);
}

Result Conn::query_once(const std::string& sql, const Params& p, bool binary) {
  return check(PQexecParams(c_, sql.c_str(), p.size(), p.types(), p.values(), p.lengths(),
                            p.formats(), binary ? 1 : 0),
               "query");
}

Txn::~Txn() {
  if (done_) return;
  try {
    c_.exec("ROLLBACK");
  } catch (...) {
    // the connection is broken; the pool drops it
  }
}

void Txn::commit() {
  c_.exec("COMMIT");
  done_ = true;
}

std::unique_ptr<Conn> Pool::borrow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) throw std::runtime_error("store: closed");
    ++out_;
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  try {
    return connect();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    --out_;
    cv_.notify_all();
    throw;
  }
}

void Pool::give_back(std::unique_ptr<Conn> c) {
  std::lock_guard<std::mutex> lock(mu_);
  --out_;
  if (!closed_ && c && c->ok() && c->idle() && idle_.size() < keep_) idle_.push_back(std::move(c));
  cv_.notify_all();
}

void Pool::close() {
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;
  cv_.wait(lock, [&] { return out_ == 0; });
  idle_.clear();
}

std::string redact(const std::string& url) {
  // postgresql://user:password@host/... -> postgresql://user:***@host/...
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  auto at = url.find('@', scheme + 3);
  auto colon = url.find(':', scheme + 3);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace lfs::pg

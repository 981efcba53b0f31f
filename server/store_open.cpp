// The store factory: which backend a --store value names.
#include "pg_client.hpp"
#include "pg_store.hpp"
#include "store.hpp"

namespace lfs {
namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

bool is_postgres(const std::string& spec) {
  return starts_with(spec, "postgresql://") || starts_with(spec, "postgres://");
}

}  // namespace

std::unique_ptr<Store> open_store(const std::string& spec, const StoreOptions& opts) {
  if (is_postgres(spec)) return open_pg_store(spec, opts);
  if (starts_with(spec, "sqlite:")) {
    if (spec.size() == 7) throw std::runtime_error("store: sqlite: wants a folder (sqlite:DIR)");
    return open_sqlite_store(spec.substr(7), opts);
  }
  if (spec.find("://") != std::string::npos)
    throw std::runtime_error("store: unknown kind of store '" + describe_store(spec) +
                             "' (postgresql://... or sqlite:DIR)");
  return open_sqlite_store(spec, opts);
}

std::string describe_store(const std::string& spec) { return is_postgres(spec) ? pg::redact(spec) : spec; }

}  // namespace lfs

// PgSources: a run's source texts (SourceStore, store.hpp) in the PostgreSQL database of the
// run store, so that `--store postgresql://` servers share them as they share runs: a file
// shipped to one server is served by any other at once. Paths and texts are bytea: any bytes
// a collector sends (no UTF-8 or NUL rule), ordered bytewise like SQLite's BINARY collation,
// so both backends list a run's files in the same order.
#include <map>

#include "store/postgres/pg_client.hpp"
#include "store/store.hpp"

namespace lfs {
namespace {

// pg_advisory_xact_lock key serialising the table's creation between servers starting at once
// (CREATE TABLE IF NOT EXISTS alone may fail on a concurrent creation). Beside pg_store.cpp's.
constexpr int64_t kSourcesSchemaLock = 0x6c7566'0003;

class PgSources : public SourceStore {
 public:
  explicit PgSources(const std::string& url) : pool_(url, 4) {
    pg::Pool::Lease c(pool_);
    pg::Txn txn(*c);
    c->query("sources_lock", "SELECT pg_advisory_xact_lock($1)",
             pg::Params().add(kSourcesSchemaLock));
    c->exec(
        "CREATE TABLE IF NOT EXISTS sources(run bigint NOT NULL, path bytea NOT NULL,"
        " text bytea NOT NULL, PRIMARY KEY(run, path))");
    txn.commit();
  }
  void put_sources(int64_t run, const std::vector<SourceFile>& files) override {
    // The last file of a path wins, as SQLite's INSERT OR REPLACE does (PostgreSQL refuses to
    // update one row twice in a statement).
    if (files.empty()) return;
    std::map<std::string_view, std::string_view> last;
    for (const SourceFile& f : files) last[f.path] = f.text;
    std::vector<std::string_view> paths, texts;
    for (const auto& [p, t] : last) {
      paths.push_back(p);
      texts.push_back(t);
    }
    pg::Pool::Lease c(pool_);
    c->query("sources_put",
             "INSERT INTO sources(run, path, text) SELECT $1, * FROM unnest($2::bytea[], "
             "$3::bytea[]) ON CONFLICT(run, path) DO UPDATE SET text=excluded.text",
             pg::Params().add(run).array(paths, true).array(texts, true));
  }

  std::optional<std::string> get_source(int64_t run, const std::string& path) override {
    pg::Pool::Lease c(pool_);
    auto r = c->query("sources_get", "SELECT text FROM sources WHERE run=$1 AND path=$2",
                      pg::Params().add(run).bytea(path), /*binary=*/true);
    if (!r.rows()) return std::nullopt;
    return std::string(r.bytes(0, 0));
  }

  std::vector<std::pair<std::string, int64_t>> list_sources(int64_t run) override {
    pg::Pool::Lease c(pool_);
    auto r = c->query("sources_list",
                      "SELECT path, length(text)::int8 FROM sources WHERE run=$1 ORDER BY path",
                      pg::Params().add(run), /*binary=*/true);
    std::vector<std::pair<std::string, int64_t>> out;
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.bytes(i, 0), r.bin_i64(i, 1));
    return out;
  }

  void drop_sources(int64_t run) override {
    pg::Pool::Lease c(pool_);
    c->query("sources_drop", "DELETE FROM sources WHERE run=$1", pg::Params().add(run));
  }

 private:
  pg::Pool pool_;
};

}  // namespace

std::unique_ptr<SourceStore> open_pg_sources(const std::string& url) {
  return std::make_unique<PgSources>(url);
}

}  // namespace lfs

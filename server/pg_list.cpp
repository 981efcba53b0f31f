// Reading runs from the PostgreSQL store: rows, their tags and totals, and the listing (filters,
// cursor, capped counts). Apart from pg_store.cpp (writes, trees, retention) to keep each file
// small; the schema is pg_store.cpp's.
#include "pg_list.hpp"

#include <limits>
#include <unordered_map>

namespace lfs {
namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// A listing's total is counted up to kCountCap (then a lower bound); up to kJoinCountCap when
// each match costs a join (a condition the driving index does not cover).
constexpr int64_t kCountCap = 10000;
constexpr int64_t kJoinCountCap = 1000;
}  // namespace

RunInfo pg_read_run(const pg::Result& r, int i) {
  RunInfo info;
  info.id = r.i64(i, 0);
  info.name = r.text(i, 1);
  info.source = r.text(i, 2);
  info.status = r.text(i, 3);
  info.started_ns = r.i64(i, 4);
  info.ended_ns = r.i64(i, 5);
  info.hz = r.dbl(i, 6);
  if (!r.null(i, 7)) info.stats_json = r.text(i, 7);
  info.stack_count = r.i64(i, 8);
  info.revision = r.i64(i, 9);
  return info;
}

// Tags and totals of `runs`: two queries for a whole page.
void pg_fill_runs(pg::Conn& c, std::vector<RunInfo>& runs) {
  if (runs.empty()) return;
  std::vector<int64_t> ids;
  std::unordered_map<int64_t, RunInfo*> by_id;
  for (RunInfo& r : runs) {
    ids.push_back(r.id);
    by_id[r.id] = &r;
  }
  auto t = c.query("fill_tags", "SELECT run, key, value FROM tags WHERE run=ANY($1::int8[])",
                   pg::Params().array(ids));
  for (int i = 0; i < t.rows(); ++i) by_id[t.i64(i, 0)]->tags.emplace(t.text(i, 1), t.text(i, 2));
  auto m =
      c.query("fill_totals", "SELECT run, metric, total FROM metrics WHERE run=ANY($1::int8[])",
              pg::Params().array(ids));
  for (int i = 0; i < m.rows(); ++i)
    by_id[m.i64(i, 0)]->totals[static_cast<int>(m.i64(i, 1))] = m.i64(i, 2);
}

// As SqliteStore::list_runs: the rows come newest first from the index of the condition with
// the fewest candidates (each counted up to the cap in its own index; with a name, a tag's
// candidates are those of name and tag, tags_kvn), the other conditions checked per run. The
// plan is spelled out rather than left to the planner, which joined and counted 10,000 rows
// (100 to 300 ms at 1M runs) where one index walk serves the page.
RunList pg_list_runs(pg::Conn& conn, const RunFilter& f) {
  pg::Conn* c = &conn;
  pg::Txn txn(*c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // counts and page agree
  auto capped = [&](const std::string& sql, const pg::Params& p, int64_t cap = kCountCap) {
    return c
        ->query_once("SELECT COUNT(*) FROM (" + sql + " LIMIT " + std::to_string(cap + 1) + ") m",
                     p)
        .i64(0, 0);
  };
  const bool named = !f.name.empty();
  int64_t best = kMax;
  int driver = -1;  // -1 all, 0 name, 1 status, 2 + i: tag i
  if (named) {      // with a status, the runs of both (runs_name_status)
    best = f.status.empty() ? capped("SELECT 1 FROM runs WHERE name=$1", pg::Params().add(f.name))
                            : capped("SELECT 1 FROM runs WHERE name=$1 AND status=$2",
                                     pg::Params().add(f.name).add(f.status));
    driver = 0;
  }
  int ti = 0;
  for (const auto& [k, v] : f.tags) {
    const int64_t n =
        named ? capped("SELECT 1 FROM tags WHERE key=$1 AND value=$2 AND name=$3",
                       pg::Params().add(k).add(v).add(f.name))
              : capped("SELECT 1 FROM tags WHERE key=$1 AND value=$2", pg::Params().add(k).add(v));
    if (n < best) {
      best = n;
      driver = 2 + ti;
    }
    ++ti;
  }
  // Status last, taken only when strictly fewer: it has two values, so a status past the cap
  // is most likely half the table, while a tag or a name past the cap may be far less.
  if (!f.status.empty() && !named) {
    const int64_t n = capped("SELECT 1 FROM runs WHERE status=$1", pg::Params().add(f.status));
    if (n < best) {
      best = n;
      driver = 1;
    }
  }
  const std::size_t conditions = (named ? 1 : 0) + (f.status.empty() ? 0 : 1) + f.tags.size();
  const bool covered =
      conditions == 1 || (conditions == 2 && named && (driver >= 2 || !f.status.empty()));
  pg::Params p;
  int n = 0;
  auto arg = [&n] { return "$" + std::to_string(++n); };
  std::string from = " FROM runs", where = " WHERE true", order = " ORDER BY runs.id DESC";
  if (driver >= 2) {
    auto it = std::next(f.tags.begin(), driver - 2);
    from = " FROM tags d JOIN runs ON runs.id=d.run";
    where += " AND d.key=" + arg();
    where += " AND d.value=" + arg();
    p.add(it->first).add(it->second);
    if (named) {
      where += " AND d.name=" + arg();
      p.add(f.name);
    }
    order = " ORDER BY d.run DESC";
  }
  if (named && driver < 2) {
    where += " AND runs.name=" + arg();
    p.add(f.name);
  }
  if (!f.status.empty()) {
    where += " AND status=" + arg();
    p.add(f.status);
  }
  ti = 0;
  for (const auto& [k, v] : f.tags) {
    if (driver != 2 + ti) {
      where += " AND EXISTS (SELECT 1 FROM tags t WHERE t.run=runs.id AND t.key=" + arg();
      where += " AND t.value=" + arg() + ")";
      p.add(k).add(v);
    }
    ++ti;
  }
  const pg::Params count_params = p;
  RunList out;
  std::string page = from + where;
  if (f.before_id > 0) {
    page += " AND runs.id<" + arg();
    p.add(f.before_id);
  }
  page += order + " LIMIT " + arg();
  page += " OFFSET " + arg();
  p.add(f.limit + 1).add(f.offset);
  auto r = c->query_once(
      "SELECT runs.id, runs.name, source, status, started_ns, ended_ns, hz, stats, stack_count, "
      "revision" +
          page,
      p);
  for (int i = 0; i < r.rows(); ++i) out.runs.push_back(pg_read_run(r, i));
  const bool last_page = static_cast<int64_t>(out.runs.size()) <= f.limit;
  if (!last_page) {
    out.runs.pop_back();
    out.next_cursor = out.runs.back().id;
  }
  if (last_page && f.before_id == 0) {  // the whole answer is on this page: no count
    out.total = f.offset + static_cast<int64_t>(out.runs.size());
  } else {  // counted up to a cap: a page never pays for a million matches
    // A filter the driving index does not cover costs a run lookup per match counted: up to
    // kJoinCountCap of them (then a lower bound).
    const int64_t cap = covered || conditions == 0 ? kCountCap : kJoinCountCap;
    out.total = covered ? best : capped("SELECT 1" + from + where, count_params, cap);
    if (out.total > cap) out.total_exact = false;
  }
  pg_fill_runs(*c, out.runs);
  txn.commit();
  return out;
}

}  // namespace lfs

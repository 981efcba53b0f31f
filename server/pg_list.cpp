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

// Tags and totals of `runs`: one query for a whole page (a round trip less: under load each
// one waits for a core).
void pg_fill_runs(pg::Conn& c, std::vector<RunInfo>& runs) {
  if (runs.empty()) return;
  std::vector<int64_t> ids;
  std::unordered_map<int64_t, RunInfo*> by_id;
  for (RunInfo& r : runs) {
    ids.push_back(r.id);
    by_id[r.id] = &r;
  }
  auto t =
      c.query("fill_runs",
              "SELECT run, 0, key, value, 0, 0::int8 FROM tags WHERE run=ANY($1::int8[]) UNION ALL"
              " SELECT run, 1, '', '', metric, total FROM metrics WHERE run=ANY($1::int8[])",
              pg::Params().array(ids));
  for (int i = 0; i < t.rows(); ++i) {
    RunInfo& r = *by_id[t.i64(i, 0)];
    if (t.i64(i, 1) == 0)
      r.tags.emplace(t.text(i, 2), t.text(i, 3));
    else
      r.totals[static_cast<int>(t.i64(i, 4))] = t.i64(i, 5);
  }
}

// As SqliteStore::list_runs: the rows come newest first from the index of the condition with
// the fewest candidates (each counted up to the cap in its own index, all in one statement; with
// a name, a tag's candidates are those of name and tag, tags_kvn; with a status and no name,
// those of status and tag, tags_kvs), the other conditions checked per run. The plan is spelled
// out rather than left to the planner, which joined and counted 10,000 rows (100 to 300 ms at
// 1M runs) where one index walk serves the page.
RunList pg_list_runs(pg::Conn& conn, const RunFilter& f) {
  pg::Conn* c = &conn;
  pg::Txn txn(*c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // counts and page agree
  auto capped_sql = [](const std::string& sql, int64_t cap) {
    return "(SELECT COUNT(*) FROM (" + sql + " LIMIT " + std::to_string(cap + 1) + ") m)";
  };
  auto capped = [&](const std::string& sql, const pg::Params& p, int64_t cap) {
    return c->query_once("SELECT " + capped_sql(sql, cap), p).i64(0, 0);
  };
  const bool named = !f.name.empty(), with_status = !f.status.empty();
  // The candidates of each condition, counted in one statement (one round trip): the name, each
  // tag (with the name, or else the status), the status; columns in that order.
  std::vector<std::string> counts;
  pg::Params cp;
  int cn = 0;
  auto carg = [&cn] { return "$" + std::to_string(++cn); };
  // The name's: with a status, the runs of both (runs_name_status); without, only when no tag
  // (a tag's candidates, tags_kvn, are a subset of the name's).
  const bool count_name = named && (with_status || f.tags.empty());
  if (count_name) {
    std::string w = "SELECT 1 FROM runs WHERE name=" + carg();
    cp.add(f.name);
    if (with_status) {
      w += " AND status=" + carg();
      cp.add(f.status);
    }
    counts.push_back(capped_sql(w, kCountCap));
  }
  for (const auto& [k, v] : f.tags) {
    std::string w = "SELECT 1 FROM tags WHERE key=" + carg();
    w += " AND value=" + carg();
    cp.add(k).add(v);
    if (named) {
      w += " AND name=" + carg();
      cp.add(f.name);
    } else if (with_status) {
      w += " AND status=" + carg();
      cp.add(f.status);
    }
    counts.push_back(capped_sql(w, kCountCap));
  }
  // The status alone: only when it is the only condition, as a tag's candidates above are
  // already those of the tag and the status (a subset: the status would never be fewer).
  if (with_status && !named && f.tags.empty()) {
    counts.push_back(capped_sql("SELECT 1 FROM runs WHERE status=" + carg(), kCountCap));
    cp.add(f.status);
  }
  std::vector<int64_t> n_of;
  if (!counts.empty()) {
    std::string sql = "SELECT ";
    for (std::size_t i = 0; i < counts.size(); ++i) sql += (i ? ", " : "") + counts[i];
    auto r = c->query_once(sql, cp);
    for (std::size_t i = 0; i < counts.size(); ++i) n_of.push_back(r.i64(0, static_cast<int>(i)));
  }
  int64_t best = kMax;
  int driver = -1;  // -1 all, 0 name, 1 status, 2 + i: tag i
  std::size_t col = 0;
  if (count_name) {
    best = n_of[col++];
    driver = 0;
  }
  for (std::size_t ti = 0; ti < f.tags.size(); ++ti) {
    const int64_t n = n_of[col++];
    if (n < best) {
      best = n;
      driver = 2 + static_cast<int>(ti);
    }
  }
  if (with_status && !named && f.tags.empty()) {
    best = n_of[col];
    driver = 1;
  }
  const std::size_t conditions = (named ? 1 : 0) + (f.status.empty() ? 0 : 1) + f.tags.size();
  // Covered: the driving index holds every condition (the count of the choice is the total).
  const bool covered = conditions == 1 || (conditions == 2 && (named || with_status) &&
                                           (driver >= 2 || (named && with_status)));
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
    } else if (with_status) {  // tags_kvs: the status is the tag row's
      where += " AND d.status=" + arg();
      p.add(f.status);
    }
    order = " ORDER BY d.run DESC";
  }
  if (named && driver < 2) {
    where += " AND runs.name=" + arg();
    p.add(f.name);
  }
  if (with_status && (named || driver < 2)) {
    where += " AND runs.status=" + arg();
    p.add(f.status);
  }
  int ti = 0;
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
      "SELECT runs.id, runs.name, source, runs.status, started_ns, ended_ns, hz, stats, "
      "stack_count, "
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

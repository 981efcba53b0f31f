// Reading runs from the PostgreSQL store: rows, their tags and totals, and the listing (filters,
// cursor, capped counts). Apart from pg_store.cpp (writes, trees, retention) to keep each file
// small; the schema is pg_store.cpp's.
#include "store/postgres/pg_list.hpp"

#include <iterator>
#include <limits>
#include <string>
#include <unordered_map>

namespace lfs {
namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kCountCap = kListCountCap;  // store.hpp: the listing policy
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

namespace {

// Which index a listing walks: the condition with the fewest candidates.
struct PgPlan {
  int driver = -1;  // -1 all, 0 name, 1 status, 2 + i: tag i
  int64_t best = kMax;
  bool covered = false;  // the driving index holds every condition: its count is the total
};

std::string capped_sql(const std::string& sql, int64_t cap) {
  return "(SELECT COUNT(*) FROM (" + sql + " LIMIT " + std::to_string(cap + 1) + ") m)";
}

// The candidates of each condition, counted in one statement (one round trip): the name
// (with a status, the runs of both; without, only when no tag: a tag's candidates, tags_kvn,
// are a subset of the name's), each tag (with the name, or else the status: tags_kvs), the
// status alone when it is the only condition.
PgPlan pg_plan(pg::Conn& c, const RunFilter& f) {
  const bool named = !f.name.empty(), with_status = !f.status.empty();
  std::vector<std::string> counts;
  pg::Params cp;
  int cn = 0;
  auto carg = [&cn] { return "$" + std::to_string(++cn); };
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
  const bool status_only = with_status && !named && f.tags.empty();
  if (status_only) {
    counts.push_back(capped_sql("SELECT 1 FROM runs WHERE status=" + carg(), kCountCap));
    cp.add(f.status);
  }
  std::vector<int64_t> n_of;
  if (!counts.empty()) {
    std::string sql = "SELECT ";
    for (std::size_t i = 0; i < counts.size(); ++i) sql += (i ? ", " : "") + counts[i];
    auto r = c.query_once(sql, cp);
    for (std::size_t i = 0; i < counts.size(); ++i) n_of.push_back(r.i64(0, static_cast<int>(i)));
  }
  PgPlan p;
  std::size_t col = 0;
  if (count_name) p = PgPlan{0, n_of[col++]};
  for (std::size_t ti = 0; ti < f.tags.size(); ++ti, ++col)
    if (n_of[col] < p.best) p = PgPlan{2 + static_cast<int>(ti), n_of[col]};
  if (status_only) p = PgPlan{1, n_of[col]};
  const std::size_t conditions = (named ? 1 : 0) + (with_status ? 1 : 0) + f.tags.size();
  p.covered = conditions == 1 || (conditions == 2 && (named || with_status) &&
                                  (p.driver >= 2 || (named && with_status)));
  return p;
}

// The listing's FROM, WHERE and ORDER BY for a plan, its parameters, and how many there are.
struct PgQuery {
  std::string from = " FROM runs", where = " WHERE true", order = " ORDER BY runs.id DESC";
  pg::Params params;
  int n = 0;
  std::string arg() { return "$" + std::to_string(++n); }
};

PgQuery pg_query(const RunFilter& f, const PgPlan& p) {
  const bool named = !f.name.empty(), with_status = !f.status.empty();
  PgQuery q;
  if (p.driver >= 2) {
    auto it = std::next(f.tags.begin(), p.driver - 2);
    q.from = " FROM tags d JOIN runs ON runs.id=d.run";
    q.where += " AND d.key=" + q.arg();
    q.where += " AND d.value=" + q.arg();
    q.params.add(it->first).add(it->second);
    if (named) {
      q.where += " AND d.name=" + q.arg();
      q.params.add(f.name);
    } else if (with_status) {  // tags_kvs: the status is the tag row's
      q.where += " AND d.status=" + q.arg();
      q.params.add(f.status);
    }
    q.order = " ORDER BY d.run DESC";
  }
  if (named && p.driver < 2) {
    q.where += " AND runs.name=" + q.arg();
    q.params.add(f.name);
  }
  if (with_status && (named || p.driver < 2)) {
    q.where += " AND runs.status=" + q.arg();
    q.params.add(f.status);
  }
  int ti = 0;
  for (const auto& [k, v] : f.tags) {
    if (p.driver != 2 + ti) {
      q.where += " AND EXISTS (SELECT 1 FROM tags t WHERE t.run=runs.id AND t.key=" + q.arg();
      q.where += " AND t.value=" + q.arg() + ")";
      q.params.add(k).add(v);
    }
    ++ti;
  }
  return q;
}

}  // namespace

// As sqlite_list_runs: the rows come newest first from the index of the condition with the
// fewest candidates (pg_plan), the other conditions checked per run (pg_query). The plan is
// spelled out rather than left to the planner, which joined and counted 10,000 rows (100 to
// 300 ms at 1M runs) where one index walk serves the page. Paging and the total follow the
// stores' one policy (store.hpp).
RunList pg_list_runs(pg::Conn& c, const RunFilter& f) {
  pg::Txn txn(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");  // counts and page agree
  const PgPlan p = pg_plan(c, f);
  PgQuery q = pg_query(f, p);
  const pg::Params count_params = q.params;
  std::string page = q.from + q.where;
  if (f.before_id > 0) {
    page += " AND runs.id<" + q.arg();
    q.params.add(f.before_id);
  }
  page += q.order + " LIMIT " + q.arg();
  page += " OFFSET " + q.arg();
  q.params.add(f.limit + 1).add(f.offset);
  auto r = c.query_once(
      "SELECT runs.id, runs.name, source, runs.status, started_ns, ended_ns, hz, stats, "
      "stack_count, revision" +
          page,
      q.params);
  RunList out;
  for (int i = 0; i < r.rows(); ++i) out.runs.push_back(pg_read_run(r, i));
  const bool last_page = finish_page(f, out);
  if (!total_from_page(f, last_page, out)) {
    const bool any = !f.name.empty() || !f.status.empty() || !f.tags.empty();
    const int64_t cap = p.covered || !any ? kCountCap : kListJoinCountCap;
    set_capped_total(
        p.covered
            ? p.best
            : c.query_once("SELECT " + capped_sql("SELECT 1" + q.from + q.where, cap), count_params)
                  .i64(0, 0),
        cap, out);
  }
  pg_fill_runs(c, out.runs);
  txn.commit();
  return out;
}

std::vector<int64_t> pg_horizons(pg::Conn& c, int64_t run, int metric,
                                 const std::vector<Resolution>& res) {
  std::vector<int64_t> widths;
  for (const Resolution& r : res) widths.push_back(r.width_ns);
  auto q = c.query("horizons",
                   "SELECT (SELECT MIN(bucket) FROM buckets WHERE run=$1 AND metric=$2 AND width=w)"
                   " FROM unnest($3::int8[]) WITH ORDINALITY AS x(w, o) ORDER BY o",
                   pg::Params().add(run).add(metric).array(widths));
  std::vector<int64_t> out;
  for (int i = 0; i < q.rows(); ++i)
    out.push_back(q.null(i, 0) ? std::numeric_limits<int64_t>::max() : q.i64(i, 0));
  return out;
}

}  // namespace lfs

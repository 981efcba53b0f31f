// Listing runs in the SQLite store (sqlite_list.hpp).
//
// A listing walks one index newest first and checks the other conditions per run: the index
// of the condition with the fewest candidates (each counted up to the cap through its own
// index), so no filter scans the table. SQLite's planner, without statistics, preferred the
// rowid order for ORDER BY id DESC and scanned every run when few matched (127 ms to 1.4 s
// at 1 million runs); the plan is therefore forced (INDEXED BY, CROSS JOIN).
#include "store/sqlite/sqlite_list.hpp"

#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace lfs {
namespace {

using sql::Stmt;

constexpr int64_t kCountCap = kListCountCap;

// The rows of `sql` (bound to `args`), counted up to cap + 1.
int64_t capped(sqlite3* db, const std::string& sql, const std::vector<std::string>& args,
               int64_t cap = kCountCap) {
  Stmt c(db, "SELECT COUNT(*) FROM (" + sql + " LIMIT " + std::to_string(cap + 1) + ")");
  for (std::size_t i = 0; i < args.size(); ++i)
    c.bind(static_cast<int>(i + 1), std::string_view(args[i]));
  int64_t n = c.step() ? c.i64(0) : 0;
  c.reset();
  return n;
}

// Which index a listing walks: the condition with the fewest candidates.
struct Plan {
  int driver = -1;                                     // -1 all, 0 name, 1 status, 2 + i: tag i
  int64_t best = std::numeric_limits<int64_t>::max();  // its candidates (capped)
  bool covered = false;  // the driver's candidates are the answer: its count is the total
};

// Candidates per condition (counted up to the cap in its index): the walk takes the index of
// the fewest. With a name, a tag's candidates are those of name and tag together (tags_kvn),
// so name + tag walks exactly its matches.
Plan plan(sqlite3* db, const RunFilter& f) {
  Plan p;
  const bool named = !f.name.empty();
  if (named) {
    p.best = capped(db, "SELECT 1 FROM runs INDEXED BY runs_name WHERE name=?", {f.name});
    p.driver = 0;
  }
  if (!f.status.empty()) {
    Stmt c(db, "SELECT n FROM run_counts WHERE status=?");
    c.bind(1, f.status);
    int64_t n = c.step() ? c.i64(0) : 0;
    c.reset();
    if (n < p.best) p = Plan{1, n};
  }
  int ti = 0;
  for (const auto& [k, v] : f.tags) {
    int64_t n =
        named ? capped(db,
                       "SELECT 1 FROM tags INDEXED BY tags_kvn WHERE key=? AND value=? AND name=?",
                       {k, v, f.name})
              : capped(db, "SELECT 1 FROM tags INDEXED BY tags_kv WHERE key=? AND value=?", {k, v});
    if (n < p.best) p = Plan{2 + ti, n};
    ++ti;
  }
  const std::size_t conditions = (named ? 1 : 0) + (f.status.empty() ? 0 : 1) + f.tags.size();
  p.covered = conditions == 1 || (conditions == 2 && named && p.driver >= 2);
  return p;
}

// The listing's FROM, WHERE and ORDER BY for a plan, and the values they bind.
struct Query {
  std::string from, where = " WHERE 1=1", order = " ORDER BY runs.id DESC";
  std::vector<std::string> args;
};

Query query(const RunFilter& f, const Plan& p) {
  Query q;
  const bool named = !f.name.empty();
  if (p.driver >= 2) {
    auto it = std::next(f.tags.begin(), p.driver - 2);
    q.from = named ? " FROM tags AS d INDEXED BY tags_kvn CROSS JOIN runs ON runs.id=d.run"
                   : " FROM tags AS d INDEXED BY tags_kv CROSS JOIN runs ON runs.id=d.run";
    q.where += named ? " AND d.key=? AND d.value=? AND d.name=?" : " AND d.key=? AND d.value=?";
    q.args = {it->first, it->second};
    if (named) q.args.push_back(f.name);
    q.order = " ORDER BY d.run DESC";
  } else {
    q.from = p.driver == 0   ? " FROM runs INDEXED BY runs_name"
             : p.driver == 1 ? " FROM runs INDEXED BY runs_status"
                             : " FROM runs";
    if (p.driver >= 0 && named && !f.status.empty())
      q.from = " FROM runs INDEXED BY runs_name_status";
  }
  if (named && p.driver < 2) {
    q.where += " AND name=?";
    q.args.push_back(f.name);
  }
  if (!f.status.empty()) {
    q.where += " AND status=?";
    q.args.push_back(f.status);
  }
  int ti = 0;
  for (const auto& [k, v] : f.tags) {
    if (p.driver != 2 + ti) {
      q.where += " AND EXISTS (SELECT 1 FROM tags WHERE run=runs.id AND key=? AND value=?)";
      q.args.push_back(k);
      q.args.push_back(v);
    }
    ++ti;
  }
  return q;
}

// The listing's total: from the trigger-kept counters when only the status filters, from
// the page when it holds the whole answer, else counted up to a cap (a page never pays
// for a million matches; a tag the driving index does not cover costs a lookup per match
// counted, up to kJoinCountCap, then a lower bound).
void count(sqlite3* db, const RunFilter& f, const Plan& p, const Query& q, bool last_page,
           RunList& out) {
  if (f.name.empty() && f.tags.empty()) {
    Stmt c(db, f.status.empty() ? "SELECT COALESCE(SUM(n), 0) FROM run_counts"
                                : "SELECT COALESCE(SUM(n), 0) FROM run_counts WHERE status=?");
    if (!f.status.empty()) c.bind(1, f.status);
    if (c.step()) out.total = c.i64(0);
    c.reset();
  } else if (!total_from_page(f, last_page, out)) {
    const int64_t cap = p.covered || f.tags.empty() ? kCountCap : kListJoinCountCap;
    set_capped_total(p.covered ? p.best : capped(db, "SELECT 1" + q.from + q.where, q.args, cap),
                     cap, out);
  }
}

}  // namespace

RunInfo sqlite_read_run(const Stmt& q) {
  RunInfo r;
  r.id = q.i64(0);
  r.name = q.text(1);
  r.source = q.text(2);
  r.status = q.text(3);
  r.started_ns = q.i64(4);
  r.ended_ns = q.i64(5);
  r.hz = q.dbl(6);
  if (!q.is_null(7)) r.stats_json = q.text(7);
  r.stack_count = q.i64(8);
  r.revision = q.i64(9);
  return r;
}

void sqlite_fill_run(sqlite3* db, RunInfo& r) {
  Stmt t(db, "SELECT key, value FROM tags WHERE run=?");
  t.bind(1, r.id);
  while (t.step()) r.tags.emplace(t.text(0), t.text(1));
  Stmt m(db, "SELECT metric, total FROM metrics WHERE run=? ORDER BY metric");
  m.bind(1, r.id);
  while (m.step()) r.totals[static_cast<int>(m.i64(0))] = m.i64(1);
}

RunList sqlite_list_runs(sqlite3* db, const RunFilter& f) {
  const Plan p = plan(db, f);
  const Query q = query(f, p);
  RunList out;
  Stmt page(db, std::string(kSqliteRunColumns) + q.from + q.where +
                    (f.before_id > 0 ? " AND runs.id<?" : "") + q.order + " LIMIT ? OFFSET ?");
  int i = 1;
  for (const std::string& a : q.args) page.bind(i++, std::string_view(a));
  if (f.before_id > 0) page.bind(i++, f.before_id);
  page.bind(i, f.limit + 1).bind(i + 1, f.offset);
  while (page.step()) out.runs.push_back(sqlite_read_run(page));
  count(db, f, p, q, finish_page(f, out), out);
  for (RunInfo& info : out.runs) sqlite_fill_run(db, info);
  return out;
}

}  // namespace lfs

// Adding a batch's values to a run in the PostgreSQL store (pg_batch.hpp): the
// dictionary rows, the metric totals, and the bucket parts merged.
#include "store/postgres/pg_batch.hpp"

#include <stdexcept>
#include <unordered_map>

namespace lfs {
namespace {

// A metric's parts of the target buckets (batch.hpp, parts_to_merge), sizes only.
struct Parts {
  std::vector<std::vector<int64_t>> ids, sizes, totals;  // per target
};

Parts read_parts(pg::Conn& c, int64_t run, int metric, const PgTargets& t) {
  // All four key columns in the index condition (at most 7 x 7 probes: one plan whatever
  // the table's statistics say); exact pairs below.
  auto q = c.query("merge_parts",
                   "SELECT width, bucket, part, total, octet_length(data)::int8 FROM buckets"
                   " WHERE run=$1 AND metric=$2 AND width=ANY($3::int8[]) AND"
                   " bucket=ANY($4::int8[]) ORDER BY part",
                   pg::Params().add(run).add(metric).array(t.widths).array(t.starts),
                   /*binary=*/true);
  const std::size_t n = t.widths.size();
  Parts p{std::vector<std::vector<int64_t>>(n), std::vector<std::vector<int64_t>>(n),
          std::vector<std::vector<int64_t>>(n)};
  for (int i = 0; i < q.rows(); ++i)
    for (std::size_t k = 0; k < n; ++k)
      if (t.widths[k] == q.bin_i64(i, 0) && t.starts[k] == q.bin_i64(i, 1)) {
        p.ids[k].push_back(q.bin_i64(i, 2));
        p.totals[k].push_back(q.bin_i64(i, 3));
        p.sizes[k].push_back(q.bin_i64(i, 4));
      }
  return p;
}

}  // namespace

// The dictionary rows a batch added to the run (frames from f0, nodes from
// n0), in one INSERT; returns the bytes they take.
int64_t pg_write_dict(pg::Conn& c, int64_t run, const RunTree& tree, std::size_t f0,
                      std::size_t n0) {
  std::vector<int32_t> kinds, firsts;
  std::vector<std::string> blobs;
  if (tree.frames.size() > f0) {
    kinds.push_back(0);
    firsts.push_back(static_cast<int32_t>(f0));
    blobs.emplace_back();
    encode_frames(tree.frames, f0, blobs.back());
  }
  if (tree.nodes.size() > n0) {
    kinds.push_back(1);
    firsts.push_back(static_cast<int32_t>(n0));
    blobs.emplace_back();
    encode_nodes(tree.nodes, n0, blobs.back());
  }
  int64_t bytes = 0;
  if (blobs.empty()) return bytes;
  for (const std::string& s : blobs) bytes += kPgRowBytes + static_cast<int64_t>(s.size());
  c.query("add_dict",
          "INSERT INTO dict(run, kind, first, data) SELECT $1, * FROM unnest($2::int4[], "
          "$3::int4[], $4::bytea[])",
          pg::Params().add(run).array(kinds).array(firsts).array(pg_views(blobs), true));
  return bytes;
}

// Adds a metric's values (summing to `sum`) to its target buckets: each merges its newest
// parts that are not much bigger than the new values, taken out in one DELETE ... RETURNING
// and written back with them as one part. Returns the change in stored bytes.
int64_t pg_merge_metric(pg::Conn& c, int64_t run, int metric, const PgTargets& t,
                        const Values& vals, int64_t sum) {
  const Parts p = read_parts(c, run, metric, t);
  std::string fresh;
  encode_values(vals, fresh);
  const std::size_t n = t.widths.size();
  std::vector<std::size_t> keep(n);
  std::vector<int64_t> taken;
  for (std::size_t k = 0; k < n; ++k) {
    keep[k] = p.ids[k].size() - parts_to_merge(p.sizes[k], static_cast<int64_t>(fresh.size()));
    taken.insert(taken.end(), p.ids[k].begin() + static_cast<std::ptrdiff_t>(keep[k]),
                 p.ids[k].end());
  }
  std::unordered_map<int64_t, std::string_view> old;
  pg::Result gone;
  if (!taken.empty()) {
    gone = c.query("merge_take",
                   "DELETE FROM buckets WHERE run=$1 AND metric=$2 AND width=ANY($3::int8[])"
                   " AND bucket=ANY($4::int8[]) AND part=ANY($5::int8[]) RETURNING part, data",
                   pg::Params().add(run).add(metric).array(t.widths).array(t.starts).array(taken),
                   /*binary=*/true);
    for (int i = 0; i < gone.rows(); ++i) old[gone.bin_i64(i, 0)] = gone.bytes(i, 1);
  }
  int64_t bytes = 0;
  std::vector<int64_t> new_totals;
  std::vector<std::string> new_datas;
  for (std::size_t k = 0; k < n; ++k) {
    int64_t total = 0;
    Values cur;
    for (std::size_t j = keep[k]; j < p.ids[k].size(); ++j) {
      auto it = old.find(p.ids[k][j]);
      if (it == old.end() || !merge_blob(it->second, cur))
        throw std::runtime_error("store: run " + std::to_string(run) + ": bad bucket");
      total = checked_add(total, p.totals[k][j], "a bucket's total");
      bytes -= kPgRowBytes + p.sizes[k][j];
    }
    new_totals.push_back(merged_total(total, sum, 1));
    new_datas.emplace_back();
    if (keep[k] == p.ids[k].size()) {
      new_datas.back() = fresh;
    } else {
      merge_values(cur, vals, 1);
      encode_values(cur, new_datas.back());
    }
    bytes += kPgRowBytes + static_cast<int64_t>(new_datas.back().size());
  }
  c.query("merge_write",
          "INSERT INTO buckets(run, metric, width, bucket, total, data)"
          " SELECT $1, $2, * FROM unnest($3::int8[], $4::int8[], $5::int8[], $6::bytea[])",
          pg::Params()
              .add(run)
              .add(metric)
              .array(t.widths)
              .array(t.starts)
              .array(new_totals)
              .array(pg_views(new_datas), true));
  return bytes;
}

// A metric's run total with `sum` added (checked before anything is written).
void pg_add_total(pg::Conn& c, int64_t run, int metric, int64_t sum) {
  auto t = c.query("metric_total", "SELECT total FROM metrics WHERE run=$1 AND metric=$2",
                   pg::Params().add(run).add(metric));
  const int64_t total = checked_add(t.rows() ? t.i64(0, 0) : 0, sum, "the run's total");
  c.query("set_total",
          "INSERT INTO metrics(run, metric, total) VALUES($1, $2, $3)"
          " ON CONFLICT(run, metric) DO UPDATE SET total=excluded.total",
          pg::Params().add(run).add(metric).add(total));
}

}  // namespace lfs

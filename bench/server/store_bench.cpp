// Store benchmark: continuous profiling in compressed time, against any Store (--store URL:
// sqlite:DIR or DIR; postgresql://... where built in). The reads are what the handlers do
// (load_tree + SVG, function table, timeline), timed in server CPU (this thread's CPU time:
// with SQLite the database work runs in the calling thread).
//
//   store_bench --store DIR long  [--chunks 10000] [--stacks 500]
//       one live run of N 10 s chunks: append CPU per chunk, then whole-run graph, details,
//       function table, timeline and a 10% range.
//   store_bench --store DIR fleet [--services 50] [--days 30] [--interval 600] [--stacks 500]
//       S services, each one live run streaming a chunk every INTERVAL simulated seconds
//       (the reduced scale: INTERVAL/10 fewer chunks than 10 s chunks) for D days, retention
//       after each simulated day: ingest rate, disk, bytes per row, reads at day 1 and day D.
//   store_bench --store URL ... --pg-pid POSTMASTER_PID
//       a PostgreSQL store: server CPU (this process) and database CPU (the postmaster's
//       processes) apart, instead of wall-clock time.
//   store_bench --store DIR list  [--runs 1000000]
//       N finished runs with tags (1% live): listing times for every kind of filter.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "store/batch.hpp"
#include "store/store.hpp"
#include "views/render.hpp"

namespace {

constexpr int64_t kS = 1000000000LL;
// Simulated time starts at a day boundary 31 days ago, so a real server opened on the store
// afterwards (bench/server/reads.sh) finds the data inside its retention, not 30 days old.
const int64_t kT0 = (std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                             .count() /
                         86400 -
                     31) *
                    86400 * kS;

double wall_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// PostgreSQL works in its own processes, which this thread's CPU time does not see. With
// --pg-pid POSTMASTER_PID the figures are split: "server CPU" is this process's CPU (what a
// luaflame-server spends: libpq, decoding, merging, rendering) and "database CPU" the CPU the
// postmaster and its children (backends, WAL writer, checkpointer...) spent meanwhile, from
// /proc/PID/schedstat (nanoseconds, not 10 ms ticks). Without it a postgresql:// store is
// timed in wall-clock time (bench/server/pg_fleet.sh measures the database from outside).
bool g_wall_clock = false;
int g_pg_pid = 0;

double cpu_ms() {
  if (g_wall_clock) return wall_ms();
  timespec ts{};
  clock_gettime(g_pg_pid ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Run time in ms of process `pid` (its first field of /proc/PID/schedstat), 0 when gone.
double run_ms(const std::string& pid) {
  std::FILE* f = std::fopen(("/proc/" + pid + "/schedstat").c_str(), "r");
  if (!f) return 0;
  unsigned long long ns = 0;
  if (std::fscanf(f, "%llu", &ns) != 1) ns = 0;
  std::fclose(f);
  return static_cast<double>(ns) / 1e6;
}

// CPU ms of the postmaster and its live children; 0 without --pg-pid. Read outside the
// intervals cpu_ms() times, so reading /proc is not counted as server CPU.
double db_ms() {
  if (!g_pg_pid) return 0;
  const std::string pm = std::to_string(g_pg_pid);
  double total = run_ms(pm);
  std::FILE* f = std::fopen(("/proc/" + pm + "/task/" + pm + "/children").c_str(), "r");
  if (!f) return total;
  char pid[32];
  while (std::fscanf(f, "%31s", pid) == 1) total += run_ms(pid);
  std::fclose(f);
  return total;
}

// Server and database CPU spent since construction (see db_ms()).
struct Spent {
  double db0 = db_ms(), c0 = cpu_ms();
  void stop(std::vector<double>& server, std::vector<double>& db) {
    const double c1 = cpu_ms(), db1 = db_ms();
    server.push_back(c1 - c0);
    db.push_back(db1 - db0);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// A service's call paths: Lua-like frames, depth 4 to 20, sharing prefixes.
std::vector<std::string> stack_pool(int service, int n) {
  std::mt19937_64 rng(static_cast<uint64_t>(service) * 7919 + 1);
  std::vector<std::string> frames;
  for (int i = 0; i < 400; ++i)
    frames.push_back("fn" + std::to_string(i) + " svc" + std::to_string(service % 7) + "/mod" +
                     std::to_string(i % 37) + ".lua:" + std::to_string(10 + i * 7 % 900));
  std::vector<std::string> out;
  std::vector<std::string> prev = {"main svc/main.lua:1"};
  while (static_cast<int>(out.size()) < n) {
    // branch off a random prefix of the previous stack
    std::size_t keep = 1 + rng() % prev.size();
    prev.resize(keep);
    std::size_t depth = 4 + rng() % 17;
    while (prev.size() < depth) prev.push_back(frames[rng() % frames.size()]);
    std::string s;
    for (auto& f : prev) {
      if (!s.empty()) s += ';';
      s += f;
    }
    out.push_back(s);
  }
  return out;
}

lfs::Batch chunk_of(const std::vector<std::string>& pool, int stacks, std::mt19937_64& rng,
                    int64_t from) {
  lfs::Batch b;
  b.metrics = {0, 1};
  b.from_ns = from;
  b.until_ns = from + 10 * kS;
  lfs::BatchBuilder bb(b);
  for (int i = 0; i < stacks; ++i) {
    int32_t node = bb.path(pool[rng() % pool.size()]);
    int64_t samples = 1 + static_cast<int64_t>(rng() % 40);
    bb.add(node, 0, samples);
    bb.add(node, 1, samples * 1001001);
  }
  return b;
}

struct ReadTimes {
  double graph = 0, details = 0, functions = 0, timeline = 0, range = 0;
  // database CPU of the same (--pg-pid)
  double db_graph = 0, db_details = 0, db_functions = 0, db_timeline = 0, db_range = 0;
  std::size_t svg_bytes = 0, nodes = 0;
};

// What the handlers do for a run page, each timed cold (no cache) as the median of `reps`.
ReadTimes time_reads(lfs::Store& st, int64_t run, int64_t from, int64_t until, int reps) {
  ReadTimes out;
  std::vector<double> g, d, f, t, r, dg, dd, df, dt, dr;
  lfs::RunInfo info = *st.get_run(run);
  for (int i = 0; i < reps; ++i) {
    lfs::View v;
    Spent c;
    lf::Tree tree = lfs::load_tree(st, run, v);
    lf::SvgOptions o;
    std::string svg = lfs::render_run_graph(tree, v, o, lfs::Drawing::svg);
    c.stop(g, dg);
    out.svg_bytes = svg.size();
    out.nodes = tree.size();
    c = Spent();
    lfs::RunInfo again = *st.get_run(run);
    lfs::FunctionTable table = lfs::function_table(lfs::load_tree(st, run, v));
    std::string details = lfs::top_functions(table, 20).dump();
    c.stop(d, dd);
    c = Spent();
    std::string fns =
        lfs::run_functions(lfs::function_table(lfs::load_tree(st, run, v)), 0, 1000).dump();
    c.stop(f, df);
    c = Spent();
    const int64_t step = std::max<int64_t>(kS, (until - from) / 100 / kS * kS);
    std::vector<int64_t> bins(static_cast<std::size_t>((until - from) / step + 1), 0);
    for (const lfs::TimePoint& p : st.timeline(run, 0, from, until, step))
      if (p.t_ns >= from && static_cast<std::size_t>((p.t_ns - from) / step) < bins.size())
        bins[static_cast<std::size_t>((p.t_ns - from) / step)] += p.value;
    c.stop(t, dt);
    c = Spent();
    lfs::View part;
    part.from_ns = from + (until - from) * 45 / 100;
    part.until_ns = part.from_ns + (until - from) / 10;
    std::string svg2 =
        lfs::render_run_graph(lfs::load_tree(st, run, part), part, o, lfs::Drawing::svg);
    c.stop(r, dr);
  }
  out.graph = median(g);
  out.details = median(d);
  out.functions = median(f);
  out.timeline = median(t);
  out.range = median(r);
  out.db_graph = median(dg);
  out.db_details = median(dd);
  out.db_functions = median(df);
  out.db_timeline = median(dt);
  out.db_range = median(dr);
  return out;
}

void print_reads(const char* label, const ReadTimes& r) {
  std::printf(
      "%s: server CPU ms (median of 5): graph %.1f, details %.1f, functions %.1f, timeline %.1f, "
      "10%% range graph %.1f  (tree %zu nodes, SVG %zu KB)\n",
      label, r.graph, r.details, r.functions, r.timeline, r.range, r.nodes, r.svg_bytes / 1024);
  if (g_pg_pid)
    std::printf(
        "%s: database CPU ms (median of 5): graph %.1f, details %.1f, functions %.1f, timeline "
        "%.1f, 10%% range graph %.1f\n",
        label, r.db_graph, r.db_details, r.db_functions, r.db_timeline, r.db_range);
}

int64_t arg(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::stoll(argv[i + 1]);
  return def;
}

std::string dir_of(const std::string& url) {
  return url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
}

int64_t disk_bytes(const std::string& url) {
  if (url.find("://") != std::string::npos) return -1;
  int64_t n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir_of(url), ec))
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  return n;
}

lfs::NewRun live_run(const std::string& name, int64_t start) {
  lfs::NewRun r;
  r.name = name;
  r.stream = "bench:" + name;
  r.source = "stream";
  r.finished = false;
  r.started_ns = r.ended_ns = start;
  r.metrics = {0, 1};
  r.tags = {{"env", "bench"}};
  return r;
}

int long_run(lfs::Store& st, int argc, char** argv) {
  const int chunks = static_cast<int>(arg(argc, argv, "--chunks", 10000));
  const int stacks = static_cast<int>(arg(argc, argv, "--stacks", 500));
  auto pool = stack_pool(1, 3000);
  std::mt19937_64 rng(42);
  bool created = false;
  int64_t id = st.open_stream(live_run("long", kT0), created);
  std::vector<double> cpu, db, wall;
  double t_start = wall_ms();
  for (int i = 0; i < chunks; ++i) {
    lfs::Batch b = chunk_of(pool, stacks, rng, kT0 + i * 10 * kS);
    double w = wall_ms();
    Spent c;
    st.append(id, i, b);
    c.stop(cpu, db);
    wall.push_back(wall_ms() - w);
  }
  double total_s = (wall_ms() - t_start) / 1000;
  std::printf(
      "long run: %d chunks of %d stacks in %.1f s; append server CPU ms: median %.2f, p99 %.2f, "
      "max %.2f; "
      "wall median %.2f, p99 %.2f\n",
      chunks, stacks, total_s, median(cpu), pct(cpu, 0.99), pct(cpu, 1.0), median(wall),
      pct(wall, 0.99));
  std::vector<double> last(
      cpu.end() - std::min<std::ptrdiff_t>(1000, static_cast<std::ptrdiff_t>(cpu.size())),
      cpu.end());
  std::printf("  last 1000 chunks: append CPU median %.2f ms, p99 %.2f ms\n", median(last),
              pct(last, 0.99));
  if (g_pg_pid)
    std::printf("  append database CPU ms: median %.2f, p99 %.2f, max %.2f\n", median(db),
                pct(db, 0.99), pct(db, 1.0));
  print_reads("  reads after all chunks", time_reads(st, id, kT0, kT0 + chunks * 10 * kS, 5));
  std::printf("  disk: %.1f MB\n", static_cast<double>(disk_bytes(argv[2])) / 1e6);
  return 0;
}

int fleet(lfs::Store& st, int argc, char** argv) {
  const int services = static_cast<int>(arg(argc, argv, "--services", 50));
  const int days = static_cast<int>(arg(argc, argv, "--days", 30));
  const int64_t interval = arg(argc, argv, "--interval", 600);
  const int stacks = static_cast<int>(arg(argc, argv, "--stacks", 500));
  // --first N: services N.. (a second bench process on the same database plays a second server)
  const int first = static_cast<int>(arg(argc, argv, "--first", 0));
  std::printf(
      "fleet: %d services, %d simulated days, one %d-stack chunk per service every %lld simulated "
      "s "
      "(10 s chunks reduced %lldx)\n",
      services, days, stacks, static_cast<long long>(interval),
      static_cast<long long>(interval / 10));
  std::vector<std::vector<std::string>> pools;
  std::vector<int64_t> ids;
  for (int s = 0; s < services; ++s) {
    pools.push_back(stack_pool(s + first, 2000));
    bool created = false;
    ids.push_back(st.open_stream(live_run("svc" + std::to_string(s + first), kT0), created));
  }
  std::mt19937_64 rng(7);
  const int64_t per_day = 86400 / interval;
  int64_t seq = 0, total_chunks = 0;
  std::vector<double> cpu;
  for (int day = 1; day <= days; ++day) {
    double w = wall_ms(), c0 = cpu_ms();
    for (int64_t k = 0; k < per_day; ++k) {
      const int64_t t = kT0 + ((day - 1) * per_day + k) * interval * kS;
      for (int s = 0; s < services; ++s) {
        lfs::Batch b = chunk_of(pools[static_cast<std::size_t>(s)], stacks, rng, t);
        double c = cpu_ms();
        st.append(ids[static_cast<std::size_t>(s)], seq, b);
        cpu.push_back(cpu_ms() - c);
        ++total_chunks;
      }
      ++seq;
    }
    double day_wall = (wall_ms() - w) / 1000;
    double day_cpu = (cpu_ms() - c0) / 1000;
    lfs::RetainOptions ro;
    ro.now_ns = kT0 + day * 86400 * kS;
    double rc = cpu_ms();
    lfs::RetainResult rr = st.retain(ro);
    double retain_ms = cpu_ms() - rc;
    lfs::StoreStats ss = st.stats();
    std::printf(
        "day %2d: %lld chunks in %.1f s (%.0f chunks/s, append CPU median %.2f ms); retention %.0f "
        "ms CPU, "
        "%lld buckets trimmed, %.1f MB freed; disk %.1f MB, in use %.1f MB\n",
        day, static_cast<long long>(per_day) * services, day_wall,
        static_cast<double>(per_day * services) / day_wall, median(cpu), retain_ms,
        static_cast<long long>(rr.buckets_trimmed), static_cast<double>(rr.bytes_freed) / 1e6,
        // a database server's disk: the store's own figure (PostgreSQL: pg_database_size)
        static_cast<double>(disk_bytes(argv[2]) < 0 ? ss.file_bytes : disk_bytes(argv[2])) / 1e6,
        static_cast<double>(ss.stored_bytes) / 1e6);
    (void)day_cpu;
    cpu.clear();
    std::fflush(stdout);
    if (day == 1 || day == days || day == 7) {
      const int64_t until = kT0 + day * 86400 * kS;
      const int64_t from = std::max(kT0, until - 30 * 86400 * kS);
      print_reads(("  svc0 after day " + std::to_string(day)).c_str(),
                  time_reads(st, ids[0], from, until, 5));
      std::vector<double> lt;
      for (int i = 0; i < 5; ++i) {
        double c = cpu_ms();
        lfs::RunFilter f;
        f.status = "live";
        st.list_runs(f);
        lt.push_back(cpu_ms() - c);
      }
      std::printf("  list live runs: %.2f ms\n", median(lt));
    }
  }
  std::printf("fleet total: %lld chunks\n", static_cast<long long>(total_chunks));
  return 0;
}

int list(lfs::Store& st, int argc, char** argv) {
  const int64_t runs = arg(argc, argv, "--runs", 1000000);
  lfs::Batch b;
  b.metrics = {0};
  lfs::BatchBuilder bb(b);
  bb.add(bb.path("main;work"), 0, 1);
  double w = wall_ms();
  lfs::RunInfo existing;
  // Runs made before (ids 1..N): the newest id, as a total past the count cap is a lower bound.
  lfs::RunList have = st.list_runs({});
  for (int64_t i = have.runs.empty() ? 0 : have.runs.front().id; i < runs; ++i) {
    lfs::NewRun r;
    r.name = "app" + std::to_string(i % 100);
    r.tags = {{"branch", i % 10 == 0 ? "main" : "dev" + std::to_string(i % 1000)},
              {"host", "h" + std::to_string(i % 37)}};
    r.metrics = {0};
    r.started_ns = r.ended_ns = kT0 + i * kS;
    b.from_ns = b.until_ns = r.started_ns;
    if (i % 100 == 7) {
      r.stream = "s" + std::to_string(i);
      r.finished = false;
      r.source = "stream";
      bool created = false;
      st.open_stream(r, created);
    } else {
      st.create_run(r, b);
    }
  }
  std::printf("list: %lld runs (created in %.0f s)\n", static_cast<long long>(runs),
              (wall_ms() - w) / 1000);
  struct Q {
    const char* what;
    lfs::RunFilter f;
  };
  std::vector<Q> qs;
  qs.push_back({"no filter", {}});
  {
    lfs::RunFilter f;
    f.status = "live";
    qs.push_back({"status=live", f});
  }
  {
    lfs::RunFilter f;
    f.status = "finished";
    qs.push_back({"status=finished", f});
  }
  {
    lfs::RunFilter f;
    f.name = "app42";
    qs.push_back({"name", f});
  }
  {
    lfs::RunFilter f;
    f.tags = {{"branch", "main"}};
    qs.push_back({"tag (10%)", f});
  }
  {
    lfs::RunFilter f;
    f.tags = {{"branch", "dev777"}};
    qs.push_back({"tag (0.1%)", f});
  }
  {
    lfs::RunFilter f;
    f.name = "app7";
    f.tags = {{"branch", "dev777"}};
    qs.push_back({"name+tag (0.1%)", f});
  }
  {
    lfs::RunFilter f;
    f.name = "app3";
    f.status = "live";
    qs.push_back({"name+status=live", f});
  }
  {
    lfs::RunFilter f;
    f.name = "app3";
    f.tags = {{"host", "h5"}};
    qs.push_back({"name+tag (1/3700)", f});
  }
  {
    lfs::RunFilter f;
    f.before_id = runs / 2;
    qs.push_back({"cursor at the middle", f});
  }
  {
    lfs::RunFilter f;
    f.status = "finished";
    f.tags = {{"host", "h5"}};
    qs.push_back({"status+tag (1/37)", f});
  }
  {
    lfs::RunFilter f;
    f.name = "app3";
    f.tags = {{"branch", "main"}};
    qs.push_back({"name+tag, no match", f});
  }
  // Wall time, and CPU (this thread's; with --pg-pid this process's and the database's apart):
  // on a loaded machine the wall time is mostly waiting for a core.
  std::printf("  %-22s %9s %9s %9s\n", "filter (median of 5)", "wall ms", "CPU ms",
              g_pg_pid ? "db CPU ms" : "");
  for (auto& q : qs) {
    std::vector<double> t, cpu, db;
    lfs::RunList l;
    for (int i = 0; i < 5; ++i) {
      double w = wall_ms();
      Spent c;
      l = st.list_runs(q.f);
      c.stop(cpu, db);
      t.push_back(wall_ms() - w);
    }
    std::printf("  %-22s %9.2f %9.2f %9.2f  (%zu runs, total %lld%s)\n", q.what, median(t),
                median(cpu), median(db), l.runs.size(), static_cast<long long>(l.total),
                l.total_exact ? "" : "+");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[1], "--store") != 0) {
    std::fprintf(stderr,
                 "usage: store_bench --store URL long|fleet|list [options] (see the source)\n");
    return 2;
  }
  lfs::StoreOptions o;
  o.sync_full = arg(argc, argv, "--sync-full", 0) != 0;
  g_pg_pid = static_cast<int>(arg(argc, argv, "--pg-pid", 0));
  g_wall_clock = !g_pg_pid && std::string(argv[2]).find("://") != std::string::npos;
  auto st = lfs::open_store(argv[2], o);
  std::string what = argv[3];
  int rc = what == "long"    ? long_run(*st, argc, argv)
           : what == "fleet" ? fleet(*st, argc, argv)
           : what == "list"  ? list(*st, argc, argv)
                             : 2;
  st->close();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS of the bench process: %ld MB\n", ru.ru_maxrss / 1024);
  return rc;
}

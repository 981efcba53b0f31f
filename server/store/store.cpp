// Store helpers shared by every implementation: resolutions, opening by URL
// and the retention policy (retain_runs, over each store's RetainSteps).
#include <algorithm>
#include <charconv>

#include "luaflame/wire.hpp"
#include "store/postgres/pg_client.hpp"
#include "store/postgres/pg_store.hpp"
#include "store/store.hpp"

namespace lfs {

int metric_index(std::string_view name) {
  for (std::size_t i = 0; i < lfw::kMetricCount; ++i)
    if (lfw::kMetricList[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string_view metric_name(int index) {
  if (index < 0 || index >= static_cast<int>(lfw::kMetricCount)) return "?";
  return lfw::kMetricList[index].name;
}

std::string_view metric_units(int index) {
  if (index < 0 || index >= static_cast<int>(lfw::kMetricCount)) return "";
  return lfw::kMetricList[index].units;
}

namespace {
constexpr int64_t kSec = 1000000000LL;
constexpr int64_t kDay = 86400 * kSec;

// "10s", "1m", "2h", "30d", "0" -> ns; false when malformed.
bool parse_span(std::string_view s, int64_t& out) {
  if (s == "0") {
    out = 0;
    return true;
  }
  if (s.size() < 2) return false;
  int64_t unit = 0;
  switch (s.back()) {
    case 's':
      unit = kSec;
      break;
    case 'm':
      unit = 60 * kSec;
      break;
    case 'h':
      unit = 3600 * kSec;
      break;
    case 'd':
      unit = kDay;
      break;
    default:
      return false;
  }
  int64_t n = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size() - 1, n);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() - 1 || n <= 0 || n > 100000 * 366)
    return false;
  out = n * unit;
  return true;
}
}  // namespace

std::vector<Resolution> default_resolutions() {
  return {{kSec, kDay},           {10 * kSec, kDay},        {60 * kSec, 7 * kDay},
          {600 * kSec, 7 * kDay}, {3600 * kSec, 30 * kDay}, {kDay, 30 * kDay}};
}

std::string parse_resolutions(std::string_view text, std::vector<Resolution>& out) {
  std::vector<Resolution> res;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::size_t colon = item.find(':');
    Resolution r;
    if (colon == std::string_view::npos || !parse_span(item.substr(0, colon), r.width_ns) ||
        r.width_ns == 0 || !parse_span(item.substr(colon + 1), r.keep_ns))
      return "a resolution is WIDTH:KEEP such as 1m:7d (units s m h d; KEEP 0 keeps forever), got "
             "'" +
             std::string(item) + "'";
    if (!res.empty() &&
        (r.width_ns <= res.back().width_ns || r.width_ns % res.back().width_ns != 0))
      return "each resolution's width must be a multiple of the one before, got '" +
             std::string(item) + "'";
    res.push_back(r);
  }
  if (res.empty()) return "at least one resolution (WIDTH:KEEP,...)";
  out = std::move(res);
  return {};
}

bool finish_page(const RunFilter& f, RunList& out) {
  const bool last = static_cast<int64_t>(out.runs.size()) <= f.limit;
  if (!last) {
    out.runs.pop_back();
    out.next_cursor = out.runs.back().id;
  }
  return last;
}

bool total_from_page(const RunFilter& f, bool last_page, RunList& out) {
  if (!last_page || f.before_id != 0) return false;
  out.total = f.offset + static_cast<int64_t>(out.runs.size());
  return true;
}

void set_capped_total(int64_t counted, int64_t cap, RunList& out) {
  out.total = counted;
  if (counted > cap) out.total_exact = false;
}

bool is_postgres(const std::string& url) {
  return url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
}

std::unique_ptr<Store> open_store(const std::string& url, const StoreOptions& opts) {
  if (is_postgres(url)) return open_pg_store(url, opts);
  if (url.rfind("sqlite:", 0) == 0) return open_sqlite_store(url.substr(7), opts);
  if (url.find("://") == std::string::npos) return open_sqlite_store(url, opts);
  throw std::runtime_error("store: '" + url +
                           "' names a store this server was built without (sqlite:DIR, DIR)");
}

std::unique_ptr<SourceStore> open_store_sources(const std::string& url) {
  return is_postgres(url) ? open_pg_sources(url) : nullptr;
}

std::string describe_store(const std::string& url) {
  return is_postgres(url) ? pg::redact(url) : url;
}

namespace {
void sort_unique(std::vector<int64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
}  // namespace

RetainResult retain_runs(RetainSteps& steps, const RetainOptions& o) {
  RetainResult out;
  std::vector<int64_t> doomed;
  if (o.older_than_ns > 0) doomed = steps.finished_before(o.older_than_ns);
  if (o.keep_runs > 0) {
    std::vector<int64_t> beyond = steps.finished_beyond(o.keep_runs);
    doomed.insert(doomed.end(), beyond.begin(), beyond.end());
  }
  sort_unique(doomed);
  for (int64_t id : doomed)
    if (steps.delete_run(id)) out.deleted.push_back(id);
  if (o.trim) {
    out.buckets_trimmed = steps.trim(o, out.trimmed);
    sort_unique(out.trimmed);
  }
  while (o.budget_bytes > 0 && steps.stored_bytes() > o.budget_bytes) {
    const std::optional<int64_t> id = steps.oldest_finished();
    if (!id || !steps.delete_run(*id)) break;  // nothing finished left, or another server's
    out.deleted.push_back(*id);
  }
  sort_unique(out.deleted);
  return out;
}

}  // namespace lfs

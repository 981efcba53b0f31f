// engine: writing pprof profiles, gunzip, frame locations (see luaflame/pprof.hpp;
// reading is pprof_read.cpp).
//
// gunzip_bounded caps the size after gunzip while inflating: a bomb is cut off,
// never inflated whole.
#include "luaflame/pprof.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <unordered_map>

#include "luaflame_pprof.pb.h"
#include "pprof_detail.hpp"

namespace lf {

namespace pb = luaflame::pprof;

namespace {

using detail::is_gzip;
bool fail(std::string& error, std::string why) {
  return detail::pprof_fail(error, std::move(why));
}

// Frame -> pprof function, for write_pprof.
struct FunctionTable {
  pb::Profile& p;
  std::unordered_map<std::string, int64_t> strings;
  std::unordered_map<std::string, uint64_t> ids;  // frame name -> function (= location) id

  int64_t str(std::string_view s) {
    auto [it, fresh] = strings.emplace(std::string(s), int64_t(p.string_table_size()));
    if (fresh) p.add_string_table(std::string(s));
    return it->second;
  }

  uint64_t id(const std::string& frame) {
    auto it = ids.find(frame);
    if (it != ids.end()) return it->second;
    uint64_t id = ids.size() + 1;
    ids.emplace(frame, id);
    std::string_view name, file;
    int64_t line = 0;
    split_frame_location(frame, name, file, line);
    pb::Function* f = p.add_function();
    f->set_id(id);
    f->set_name(str(name));
    f->set_system_name(f->name());
    f->set_filename(str(file));
    f->set_start_line(line);
    pb::Location* l = p.add_location();
    l->set_id(id);
    l->set_mapping_id(1);
    pb::Line* ln = l->add_line();
    ln->set_function_id(id);
    ln->set_line(line);
    return id;
  }
};

bool gzip_into(const std::string& in, std::string& out) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out.resize(deflateBound(&zs, uLong(in.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = uInt(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

}  // namespace

bool gunzip_bounded(std::string_view in, std::size_t max_bytes, std::string& out,
                    std::string& error) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return fail(error, "zlib init failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  out.clear();
  char buf[1 << 16];
  int rc = Z_OK;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    std::size_t got = sizeof buf - zs.avail_out;
    if (out.size() + got > max_bytes) {
      inflateEnd(&zs);
      return fail(error, "more than " + std::to_string(max_bytes) + " bytes after gunzip (limit)");
    }
    out.append(buf, got);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK || (got == 0 && zs.avail_in == 0)) {
      inflateEnd(&zs);
      return fail(error, "bad gzip data (" + std::string(zs.msg ? zs.msg : "truncated") + ")");
    }
  }
  inflateEnd(&zs);
  return true;
}

bool looks_like_pprof(std::string_view body) {
  if (is_gzip(body)) return true;
  // Field 1 (sample_type), length-delimited: 0x0a, and binary bytes soon after.
  if (body.size() < 4 || body[0] != 0x0a) return false;
  for (std::size_t i = 1; i < std::min<std::size_t>(body.size(), 64); ++i)
    if (static_cast<unsigned char>(body[i]) < 0x09) return true;
  return false;
}

bool split_frame_location(std::string_view frame, std::string_view& name, std::string_view& file,
                          int64_t& line) {
  name = frame;
  file = {};
  line = 0;
  std::size_t space = frame.find(' ');
  std::size_t colon = frame.rfind(':');
  if (space != std::string_view::npos && space > 0 &&
      frame.find('/', space) != std::string_view::npos &&
      (colon == std::string_view::npos || colon < space || colon + 1 == frame.size())) {
    // "NAME PATH" (a function known by file but not by line: Go before 1.20)
    name = frame.substr(0, space);
    file = frame.substr(space + 1);
    return true;
  }
  if (colon == std::string_view::npos || colon + 1 == frame.size()) return false;
  int64_t v = 0;
  for (std::size_t i = colon + 1; i < frame.size(); ++i) {
    char c = frame[i];
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (c - '0');
  }
  if (space == std::string_view::npos || space == 0 || space + 1 >= colon) return false;
  name = frame.substr(0, space);
  file = frame.substr(space + 1, colon - space - 1);
  line = v;
  return true;
}

std::string write_pprof(const std::vector<PprofSeries>& series, const PprofWriteOptions& opts) {
  pb::Profile p;
  FunctionTable ft{p, {}, {}};
  ft.str("");
  for (const PprofSeries& s : series) {
    pb::ValueType* t = p.add_sample_type();
    t->set_type(ft.str(s.type.type));
    t->set_unit(ft.str(s.type.unit));
  }
  pb::Mapping* m = p.add_mapping();  // one mapping that says: symbolized already
  m->set_id(1);
  m->set_has_functions(true);
  m->set_has_filenames(true);
  m->set_has_line_numbers(true);
  // One sample per distinct stack (across all series), keyed by its location ids.
  std::unordered_map<std::string, int> index;
  std::vector<uint64_t> path;
  std::string key;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Tree& tree = *series[k].tree;
    int col = series[k].col;
    // Depth-first with the path of location ids from the root.
    std::vector<std::pair<uint32_t, std::size_t>> todo{{Tree::kRoot, 0}};
    while (!todo.empty()) {
      auto [n, depth] = todo.back();
      todo.pop_back();
      path.resize(depth);
      if (n != Tree::kRoot) path.push_back(ft.id(tree.frame_name(tree.frame_of(n))));
      double v = tree.self_at(n, col);
      if (v != 0 && !path.empty()) {
        key.assign(reinterpret_cast<const char*>(path.data()), path.size() * sizeof(uint64_t));
        auto [it, fresh] = index.emplace(key, p.sample_size());
        pb::Sample* sm = fresh ? p.add_sample() : p.mutable_sample(it->second);
        if (fresh) {
          for (std::size_t i = path.size(); i-- > 0;) sm->add_location_id(path[i]);  // leaf first
          for (std::size_t i = 0; i < series.size(); ++i) sm->add_value(0);
        }
        sm->set_value(int(k), sm->value(int(k)) + int64_t(std::llround(v)));
      }
      for (uint32_t c = tree.first_child(n); c != Tree::kNone; c = tree.next_sibling(c))
        todo.push_back({c, path.size()});
    }
  }
  p.set_time_nanos(opts.time_nanos);
  p.set_duration_nanos(opts.duration_nanos);
  if (!opts.period_type.type.empty()) {
    p.mutable_period_type()->set_type(ft.str(opts.period_type.type));
    p.mutable_period_type()->set_unit(ft.str(opts.period_type.unit));
    p.set_period(opts.period);
  }
  std::string raw = p.SerializeAsString();
  if (!opts.gzip) return raw;
  std::string gz;
  if (!gzip_into(raw, gz))
    return raw;  // deflate of memory cannot fail short of OOM; plain is still valid
  return gz;
}

void svg_units_of(const PprofValueType& type, SvgOptions& o) {
  if (type.unit == "nanoseconds")
    o.unit = "ns";
  else if (type.unit == "bytes")
    o.unit = "bytes";
  else if (!type.type.empty())
    o.count_name = type.type;
}

}  // namespace lf

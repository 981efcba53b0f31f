// engine: pprof in and out (see luaflame/pprof.hpp).
//
// A hostile body must be refused, never obeyed: the size after gunzip is
// capped while inflating; the top-level fields are counted (and every string
// measured) by a cheap pass over the wire format before protobuf allocates
// anything; protobuf's recursion limit caps nesting; every index and id is
// checked before use.
#include "luaflame/pprof.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <unordered_map>

#include "luaflame_pprof.pb.h"

namespace lf {

namespace pb = luaflame::pprof;

namespace {

bool fail(std::string& error, std::string why) {
  error = "pprof: " + std::move(why);
  return false;
}

bool is_gzip(std::string_view s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f &&
         static_cast<unsigned char>(s[1]) == 0x8b;
}

// Counts the top-level fields and measures the strings before any parse.
bool prescan(std::string_view data, const PprofLimits& lim, std::string& error) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(data.data()),
                                            int(data.size()));
  std::size_t count[16] = {};
  static const char* const kNames[16] = {"",          "sample types",
                                         "samples",   "mappings",
                                         "locations", "functions",
                                         "strings",   "",
                                         "",          "",
                                         "",          "",
                                         "",          "comments",
                                         "",          ""};
  for (;;) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    uint32_t field = tag >> 3;
    uint64_t v;
    uint32_t len;
    switch (tag & 7) {
      case 0:
        if (!in.ReadVarint64(&v)) return fail(error, "truncated varint");
        break;
      case 1:
        if (!in.Skip(8)) return fail(error, "truncated field");
        break;
      case 5:
        if (!in.Skip(4)) return fail(error, "truncated field");
        break;
      case 2:
        if (!in.ReadVarint32(&len)) return fail(error, "truncated length");
        if (field == 6 && len > lim.max_string_bytes)
          return fail(error, "string of " + std::to_string(len) + " bytes, limit " +
                                 std::to_string(lim.max_string_bytes));
        if (!in.Skip(int(len))) return fail(error, "truncated (a field runs past the end)");
        break;
      default:
        return fail(error, "not a profile (wire type " + std::to_string(tag & 7) + ")");
    }
    if (field < 16 && ++count[field] > (field == 1 ? lim.max_sample_types : lim.max_messages) &&
        *kNames[field])
      return fail(error, "more than " +
                             std::to_string(field == 1 ? lim.max_sample_types : lim.max_messages) +
                             " " + kNames[field] + " (limit)");
  }
  if (std::size_t(in.CurrentPosition()) != data.size())
    return fail(error, "not a profile (bad field tag)");
  return true;
}

struct Reader {
  const pb::Profile& p;
  const PprofLimits& lim;
  std::string& error;

  bool str(int64_t i, std::string& out) {
    if (i < 0 || i >= p.string_table_size())
      return fail(error, "string index " + std::to_string(i) + " out of range");
    out = p.string_table(int(i));
    return true;
  }

  static void hex(uint64_t a, std::string& out) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
    out = buf;
  }

  // Frame names of every function, by id.
  bool functions(std::unordered_map<uint64_t, std::string>& out) {
    for (const pb::Function& f : p.function()) {
      std::string name, file;
      if (!str(f.name(), name) || !str(f.filename(), file)) return false;
      if (name.empty()) {  // a function without a name: say which one
        hex(f.id(), name);
        name = "func " + name;
      }
      if (!file.empty()) {
        name += ' ';
        name += file;
        if (f.start_line() > 0) name += ':' + std::to_string(f.start_line());
      }
      for (char& c : name)
        if (c == ';') c = ':';  // ';' separates folded frames
      out[f.id()] = std::move(name);
    }
    return true;
  }

  // Frames of every location, root first (inlined callees come first in
  // pprof, the caller last).
  bool locations(const std::unordered_map<uint64_t, std::string>& fn,
                 std::unordered_map<uint64_t, std::vector<const std::string*>>& out,
                 std::vector<std::string>& addresses) {
    addresses.reserve(std::size_t(p.location_size()));
    for (const pb::Location& l : p.location()) {
      std::vector<const std::string*>& frames = out[l.id()];
      for (int i = l.line_size(); i-- > 0;) {
        auto f = fn.find(l.line(i).function_id());
        if (f == fn.end())
          return fail(error, "location " + std::to_string(l.id()) + " names function " +
                                 std::to_string(l.line(i).function_id()) +
                                 ", which is not in the profile");
        frames.push_back(&f->second);
      }
      if (frames.empty()) {  // not symbolized: the address
        addresses.emplace_back();
        hex(l.address(), addresses.back());
        frames.push_back(&addresses.back());
      }
    }
    return true;
  }

  bool run(PprofProfile& out) {
    for (const pb::ValueType& t : p.sample_type()) {
      out.sample_types.emplace_back();
      if (!str(t.type(), out.sample_types.back().type) ||
          !str(t.unit(), out.sample_types.back().unit))
        return false;
    }
    if (out.sample_types.empty()) return fail(error, "the profile has no sample types");
    if (!str(p.period_type().type(), out.period_type.type) ||
        !str(p.period_type().unit(), out.period_type.unit))
      return false;
    out.time_nanos = p.time_nanos();
    out.duration_nanos = p.duration_nanos();
    out.period = p.period();
    std::unordered_map<uint64_t, std::string> fn;
    std::unordered_map<uint64_t, std::vector<const std::string*>> loc;
    std::vector<std::string> addresses;
    if (!functions(fn) || !locations(fn, loc, addresses)) return false;
    std::unordered_map<std::string, std::size_t> index;
    std::string stack;
    std::size_t ntypes = out.sample_types.size();
    for (int s = 0; s < p.sample_size(); ++s) {
      const pb::Sample& sm = p.sample(s);
      if (std::size_t(sm.value_size()) != ntypes)
        return fail(error, "sample " + std::to_string(s) + " has " +
                               std::to_string(sm.value_size()) + " values for " +
                               std::to_string(ntypes) + " sample types");
      stack.clear();
      std::size_t depth = 0;
      for (int i = sm.location_id_size(); i-- > 0;) {  // leaf first in pprof
        auto l = loc.find(sm.location_id(i));
        if (l == loc.end())
          return fail(error, "sample " + std::to_string(s) + " names location " +
                                 std::to_string(sm.location_id(i)) +
                                 ", which is not in the profile");
        for (const std::string* f : l->second) {
          if (++depth > lim.max_depth)
            return fail(error, "sample " + std::to_string(s) + " is deeper than " +
                                   std::to_string(lim.max_depth) + " frames (limit)");
          if (!stack.empty()) stack += ';';
          stack += *f;
        }
      }
      auto [it, fresh] = index.emplace(stack, out.stacks.size());
      if (fresh) out.stacks.push_back({stack, std::vector<int64_t>(ntypes, 0)});
      std::vector<int64_t>& v = out.stacks[it->second].values;
      for (std::size_t k = 0; k < ntypes; ++k) v[k] += sm.value(int(k));
      ++out.samples;
    }
    return true;
  }
};

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

bool read_pprof(std::string_view body, const PprofLimits& limits, PprofProfile& out,
                std::string& error) {
  out = PprofProfile{};
  std::string plain;
  if (is_gzip(body)) {
    if (!gunzip_bounded(body, limits.max_decoded_bytes, plain, error)) return false;
    body = plain;
  } else if (body.size() > limits.max_decoded_bytes) {
    return fail(error, "more than " + std::to_string(limits.max_decoded_bytes) + " bytes (limit)");
  }
  if (body.empty()) return fail(error, "empty profile");
  if (!prescan(body, limits, error)) return false;
  pb::Profile p;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            int(body.size()));
  in.SetRecursionLimit(limits.max_nesting);
  if (!p.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return fail(error, "not a valid profile (protobuf decoding failed, or nested deeper than " +
                           std::to_string(limits.max_nesting) + ")");
  if (p.string_table_size() == 0 || !p.string_table(0).empty())
    return fail(error, "the string table must begin with \"\"");
  Reader r{p, limits, error};
  return r.run(out);
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

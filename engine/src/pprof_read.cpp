// engine: reading pprof profiles (see luaflame/pprof.hpp).
//
// A hostile body must be refused, never obeyed, and a large one must not cost
// a multiple of its size. So the profile is never parsed whole:
//  1. index(): one pass over the top-level fields counts them against the
//     limits, measures every string, and keeps each field's bytes as a view
//     into the body (the string table is never copied);
//  2. each function, location and sample is then parsed on its own, a small
//     message at a time, under protobuf's recursion limit;
//  3. frame names are made once per function, and a stack is a list of frame
//     ids, not a string: 60,000 functions of 1 KB names in stacks 8 deep cost
//     the names once, not once per stack they appear in.
// Every index and id is checked before use.
#include <google/protobuf/io/coded_stream.h>

#include <cstdio>
#include <unordered_map>

#include "luaflame/pprof.hpp"
#include "luaflame_pprof.pb.h"
#include "pprof_detail.hpp"

namespace lf {

namespace pb = luaflame::pprof;

namespace {

using detail::is_gzip;
bool fail(std::string& error, std::string why) {
  return detail::pprof_fail(error, std::move(why));
}

// The top-level fields of a profile, as views into its bytes.
struct Index {
  std::vector<std::string_view> strings, sample_types, samples, locations, functions;
  std::string_view period_type;
  int64_t time_nanos = 0, duration_nanos = 0, period = 0;
};

using Stream = google::protobuf::io::CodedInputStream;

// What index() does with one length-delimited top-level field.
bool keep_bytes(Index& ix, uint32_t field, std::string_view v, const PprofLimits& lim,
                std::string& error) {
  switch (field) {
    case 1:
      ix.sample_types.push_back(v);
      break;
    case 2:
      ix.samples.push_back(v);
      break;
    case 4:
      ix.locations.push_back(v);
      break;
    case 5:
      ix.functions.push_back(v);
      break;
    case 6:
      if (v.size() > lim.max_string_bytes)
        return fail(error, "string of " + std::to_string(v.size()) + " bytes, limit " +
                               std::to_string(lim.max_string_bytes));
      ix.strings.push_back(v);
      break;
    case 11:
      ix.period_type = v;
      break;
    default:
      break;  // mappings, comments and unknown fields are not read
  }
  return true;
}

void keep_varint(Index& ix, uint32_t field, uint64_t v) {
  if (field == 9) ix.time_nanos = static_cast<int64_t>(v);
  if (field == 10) ix.duration_nanos = static_cast<int64_t>(v);
  if (field == 12) ix.period = static_cast<int64_t>(v);
}

// Counts one top-level field against its limit.
bool count_field(std::size_t* count, uint32_t field, const PprofLimits& lim, std::string& error) {
  static const char* const kNames[16] = {"",          "sample types",
                                         "samples",   "mappings",
                                         "locations", "functions",
                                         "strings",   "",
                                         "",          "",
                                         "",          "",
                                         "",          "comments",
                                         "",          ""};
  if (field >= 16 || !*kNames[field]) return true;
  std::size_t limit = field == 1 ? lim.max_sample_types : lim.max_messages;
  if (++count[field] > limit)
    return fail(error, "more than " + std::to_string(limit) + " " + kNames[field] + " (limit)");
  return true;
}

// One pass over the top-level fields: counted, measured, kept as views.
bool index(std::string_view data, const PprofLimits& lim, Index& ix, std::string& error) {
  const auto* base = reinterpret_cast<const uint8_t*>(data.data());
  Stream in(base, int(data.size()));
  std::size_t count[16] = {};
  for (;;) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    uint32_t field = tag >> 3, len = 0;
    uint64_t v = 0;
    switch (tag & 7) {
      case 0:
        if (!in.ReadVarint64(&v)) return fail(error, "truncated varint");
        keep_varint(ix, field, v);
        break;
      case 1:
        if (!in.Skip(8)) return fail(error, "truncated field");
        break;
      case 5:
        if (!in.Skip(4)) return fail(error, "truncated field");
        break;
      case 2: {
        if (!in.ReadVarint32(&len)) return fail(error, "truncated length");
        std::string_view bytes = data.substr(std::size_t(in.CurrentPosition()));
        if (!in.Skip(int(len))) return fail(error, "truncated (a field runs past the end)");
        if (!keep_bytes(ix, field, bytes.substr(0, len), lim, error)) return false;
        break;
      }
      default:
        return fail(error, "not a profile (wire type " + std::to_string(tag & 7) + ")");
    }
    if (!count_field(count, field, lim, error)) return false;
  }
  if (std::size_t(in.CurrentPosition()) != data.size())
    return fail(error, "not a profile (bad field tag)");
  return true;
}

// Parses one message of the profile, `depth` levels below the top.
template <class M>
bool parse(std::string_view bytes, const PprofLimits& lim, M& m, std::string& error) {
  Stream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
  in.SetRecursionLimit(lim.max_nesting - 1);
  if (lim.max_nesting >= 1 && m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage())
    return true;
  return fail(error, "not a valid profile (protobuf decoding failed, or nested deeper than " +
                         std::to_string(lim.max_nesting) + ")");
}

std::string hex(uint64_t a) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

// Reads an indexed profile into `out`: frames interned, stacks as frame ids.
class Reader {
 public:
  Reader(const Index& ix, const PprofLimits& lim, PprofProfile& out, std::string& error)
      : ix_(ix), lim_(lim), out_(out), error_(error) {}

  bool run() {
    if (ix_.strings.empty() || !ix_.strings[0].empty())
      return fail(error_, "the string table must begin with \"\"");
    if (!header()) return false;
    // Interned names are looked up by views of out_.frames: no reallocation.
    out_.frames.reserve(ix_.functions.size() + ix_.locations.size());
    if (!functions() || !locations()) return false;
    for (std::size_t s = 0; s < ix_.samples.size(); ++s)
      if (!sample(s)) return false;
    return true;
  }

 private:
  const Index& ix_;
  const PprofLimits& lim_;
  PprofProfile& out_;
  std::string& error_;
  std::unordered_map<std::string_view, uint32_t> frame_ids_;
  std::unordered_map<uint64_t, uint32_t> function_frame_;
  // Location id -> [begin, end) in location_frames_ (root first).
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> location_;
  std::vector<uint32_t> location_frames_;
  std::unordered_map<std::string, std::size_t> stack_index_;  // frame ids as bytes -> stack

  bool str(int64_t i, std::string_view& s) {
    if (i < 0 || std::size_t(i) >= ix_.strings.size())
      return fail(error_, "string index " + std::to_string(i) + " out of range");
    s = ix_.strings[std::size_t(i)];
    return true;
  }

  bool value_type(const pb::ValueType& t, PprofValueType& out) {
    std::string_view type, unit;
    if (!str(t.type(), type) || !str(t.unit(), unit)) return false;
    out.type = std::string(type);
    out.unit = std::string(unit);
    return true;
  }

  bool header() {
    for (std::string_view v : ix_.sample_types) {
      pb::ValueType t;
      out_.sample_types.emplace_back();
      if (!parse(v, lim_, t, error_) || !value_type(t, out_.sample_types.back())) return false;
    }
    if (out_.sample_types.empty()) return fail(error_, "the profile has no sample types");
    pb::ValueType period;
    if (!parse(ix_.period_type, lim_, period, error_) || !value_type(period, out_.period_type))
      return false;
    out_.time_nanos = ix_.time_nanos;
    out_.duration_nanos = ix_.duration_nanos;
    out_.period = ix_.period;
    return true;
  }

  uint32_t intern(std::string name) {
    auto it = frame_ids_.find(name);
    if (it != frame_ids_.end()) return it->second;
    auto id = static_cast<uint32_t>(out_.frames.size());
    out_.frames.push_back(std::move(name));
    frame_ids_.emplace(out_.frames.back(), id);
    return id;
  }

  // The frame of every function: "NAME FILE:START_LINE", "NAME FILE" or "NAME".
  bool functions() {
    pb::Function f;
    for (std::string_view v : ix_.functions) {
      std::string_view name, file;
      if (!parse(v, lim_, f, error_) || !str(f.name(), name) || !str(f.filename(), file))
        return false;
      std::string frame = name.empty() ? "func " + hex(f.id()) : std::string(name);
      if (!file.empty()) {
        frame += ' ';
        frame += file;
        if (f.start_line() > 0) frame += ':' + std::to_string(f.start_line());
      }
      for (char& c : frame)
        if (c == ';') c = ':';  // ';' separates folded frames
      function_frame_[f.id()] = intern(std::move(frame));
    }
    return true;
  }

  // The frames of every location, root first (pprof lists inlined callees
  // first, the caller last); an unsymbolized location is its address.
  bool locations() {
    pb::Location l;
    for (std::string_view v : ix_.locations) {
      if (!parse(v, lim_, l, error_)) return false;
      auto begin = static_cast<uint32_t>(location_frames_.size());
      for (int i = l.line_size(); i-- > 0;) {
        auto f = function_frame_.find(l.line(i).function_id());
        if (f == function_frame_.end())
          return fail(error_, "location " + std::to_string(l.id()) + " names function " +
                                  std::to_string(l.line(i).function_id()) +
                                  ", which is not in the profile");
        location_frames_.push_back(f->second);
      }
      if (l.line_size() == 0) location_frames_.push_back(intern(hex(l.address())));
      location_[l.id()] = {begin, static_cast<uint32_t>(location_frames_.size())};
    }
    return true;
  }

  bool path(std::size_t s, const pb::Sample& sm, std::vector<uint32_t>& frames) {
    for (int i = sm.location_id_size(); i-- > 0;) {  // leaf first in pprof
      auto l = location_.find(sm.location_id(i));
      if (l == location_.end())
        return fail(error_, "sample " + std::to_string(s) + " names location " +
                                std::to_string(sm.location_id(i)) +
                                ", which is not in the profile");
      for (uint32_t k = l->second.first; k < l->second.second; ++k) {
        if (frames.size() >= lim_.max_depth)
          return fail(error_, "sample " + std::to_string(s) + " is deeper than " +
                                  std::to_string(lim_.max_depth) + " frames (limit)");
        frames.push_back(location_frames_[k]);
      }
    }
    return true;
  }

  bool sample(std::size_t s) {
    pb::Sample sm;
    if (!parse(ix_.samples[s], lim_, sm, error_)) return false;
    std::size_t ntypes = out_.sample_types.size();
    if (std::size_t(sm.value_size()) != ntypes)
      return fail(error_, "sample " + std::to_string(s) + " has " +
                              std::to_string(sm.value_size()) + " values for " +
                              std::to_string(ntypes) + " sample types");
    std::vector<uint32_t> frames;
    if (!path(s, sm, frames)) return false;
    std::string key(reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(uint32_t));
    auto [it, fresh] = stack_index_.emplace(std::move(key), out_.stacks.size());
    if (fresh) out_.stacks.push_back({std::move(frames), std::vector<int64_t>(ntypes, 0)});
    std::vector<int64_t>& v = out_.stacks[it->second].values;
    for (std::size_t k = 0; k < ntypes; ++k) v[k] += sm.value(int(k));
    ++out_.samples;
    return true;
  }
};

}  // namespace

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
  Index ix;
  if (!index(body, limits, ix, error)) return false;
  return Reader(ix, limits, out, error).run();
}

std::string stack_text(const PprofProfile& p, const PprofStack& s) {
  std::string out;
  for (uint32_t f : s.frames) {
    if (!out.empty()) out += ';';
    out += p.frames[f];
  }
  return out;
}

}  // namespace lf

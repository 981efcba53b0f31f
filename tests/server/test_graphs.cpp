// Integration: the flame graph endpoints' two drawings over HTTP, the
// standalone SVG and the frames as data the pages draw (.json): the same
// graph, cached and revalidated alike, refused alike.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "harness.hpp"

using nlohmann::json;

namespace {

int64_t upload(httplib::Client& c, const std::string& query, const std::string& body) {
  auto r = c.Post(("/api/runs?" + query).c_str(), body, "text/plain");
  REQUIRE(r);
  REQUIRE(r->status == 201);
  return json::parse(r->body)["id"].get<int64_t>();
}

std::size_t svg_frames(const std::string& svg) {
  static const std::regex g("<g[^>]*><title>");
  return static_cast<std::size_t>(
      std::distance(std::sregex_iterator(svg.begin(), svg.end(), g), std::sregex_iterator()));
}

// GETs `path` as .svg and as .json: both 200, the JSON a frames document
// with as many frames as the SVG draws. Returns the document.
json both(httplib::Client& c, const std::string& svg_path, const std::string& json_path) {
  CAPTURE(svg_path);
  auto svg = c.Get(svg_path.c_str());
  auto data = c.Get(json_path.c_str());
  REQUIRE(svg);
  REQUIRE(data);
  REQUIRE(svg->status == 200);
  REQUIRE(data->status == 200);
  CHECK(svg->get_header_value("Content-Type") == "image/svg+xml");
  CHECK(data->get_header_value("Content-Type") == "application/json");
  json doc = json::parse(data->body);
  CHECK(doc["format"] == "luaflame-frames");
  CHECK(doc["version"] == 1);
  CHECK(doc["frames"].size() == svg_frames(svg->body) * doc["stride"].get<std::size_t>());
  return doc;
}

}  // namespace

TEST_CASE("flamegraph, diff and sandwich: the SVG and its frames as data") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  auto c = srv.client();
  int64_t a = upload(c, "name=app", "main;work;inner 20\nmain;slow 20\nmain;fast 60\n");
  int64_t b = upload(c, "name=app", "main;work;inner 20\nmain;slow 50\nmain;fast 30\n");
  const std::string run = "/api/runs/" + std::to_string(b);

  json g = both(c, run + "/flamegraph.svg?width=900", run + "/flamegraph.json?width=900");
  CHECK(g["width"] == 900);
  CHECK(g["total"] == 100);
  CHECK(g["differential"] == false);

  const std::string pair = "base=" + std::to_string(a) + "&head=" + std::to_string(b);
  json d = both(c, "/api/diff.svg?" + pair, "/api/diff/flamegraph.json?" + pair);
  CHECK(d["differential"] == true);
  CHECK(d["stride"] == 8);

  json s = both(c, run + "/sandwich.svg?fn=work&side=callees",
                run + "/sandwich.json?fn=work&side=callees");
  CHECK(s["inverted"] == true);  // callees hang below
  CHECK(s["names"].dump().find("\"inner\"") != std::string::npos);

  // The data is cached and revalidated like the SVG (a finished run).
  const std::string q = run + "/flamegraph.json?focus=main";
  auto first = c.Get(q.c_str());
  REQUIRE(first);
  std::string etag = first->get_header_value("ETag");
  REQUIRE(!etag.empty());
  CHECK(etag != c.Get((run + "/flamegraph.svg?focus=main").c_str())->get_header_value("ETag"));
  CHECK(c.Get(q.c_str(), {{"If-None-Match", etag}})->status == 304);

  // Bad options are refused alike; a missing function is an empty graph.
  CHECK(c.Get((run + "/flamegraph.json?width=abc").c_str())->status == 422);
  CHECK(c.Get((run + "/flamegraph.json?minwidth=-1").c_str())->status == 422);
  CHECK(c.Get("/api/runs/999999/flamegraph.json")->status == 404);
  auto none = c.Get((run + "/sandwich.json?fn=nowhere").c_str());
  REQUIRE(none);
  REQUIRE(none->status == 200);
  CHECK(json::parse(none->body)["frames"].empty());
}

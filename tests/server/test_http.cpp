// Integration: the real luaflame-server on a free port, every endpoint and
// every error code over HTTP.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../support/paths.hpp"
#include "gzip.hpp"
#include "harness.hpp"
#include "luaflame/wire.hpp"

using nlohmann::json;

namespace {

const char* kFolded = "main;a;b 10\nmain;a;c 5\nmain;d 3\n";

json body_json(const httplib::Result& r) {
  REQUIRE(r);
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) FAIL("not JSON: " << r->body.substr(0, 200));
  return j;
}

int64_t upload(httplib::Client& c, const std::string& query, const std::string& body) {
  auto r = c.Post(("/api/runs?" + query).c_str(), body, "text/plain");
  REQUIRE(r);
  CAPTURE(r->body);
  REQUIRE(r->status == 201);
  return body_json(r)["id"].get<int64_t>();
}

using lft::gzip;

std::string chunk(uint64_t seq, uint64_t from_ns, uint64_t until_ns,
                  const std::vector<std::pair<std::vector<std::string>, uint64_t>>& stacks) {
  lfw::Chunk c;
  c.seq = seq;
  c.from_ns = from_ns;
  c.until_ns = until_ns;
  c.metrics = {"samples"};
  std::map<std::string, uint32_t> frames;
  std::map<std::pair<int64_t, uint32_t>, int64_t> nodes;
  for (const auto& [path, value] : stacks) {
    int64_t parent = -1;
    for (std::size_t i = 0; i < path.size(); ++i) {
      auto f = frames.emplace(path[i], static_cast<uint32_t>(c.frames.size()));
      if (f.second) c.frames.push_back(path[i]);
      auto n = nodes.emplace(std::make_pair(parent, f.first->second),
                             static_cast<int64_t>(c.nodes.size()));
      if (n.second) c.nodes.push_back({parent, f.first->second, {0}});
      parent = n.first->second;
    }
    c.nodes[static_cast<std::size_t>(parent)].values[0] += value;
  }
  std::string out;
  lfw::encode(c, out);
  return out;
}

}  // namespace

TEST_CASE("upload, read back, render, delete") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  auto c = srv.client();
  auto r = c.Post("/api/runs?name=demo&tag=branch=main&tag=commit=abc", kFolded, "text/plain");
  REQUIRE(r);
  CHECK(r->status == 201);
  json up = body_json(r);
  int64_t id = up["id"];
  CHECK(up["url"] == srv.url() + "/runs/" + std::to_string(id));
  CHECK(up["svg"] == srv.url() + "/api/runs/" + std::to_string(id) + "/flamegraph.svg");

  json run = body_json(c.Get(("/api/runs/" + std::to_string(id)).c_str()));
  CHECK(run["name"] == "demo");
  CHECK(run["status"] == "finished");
  CHECK(run["source"] == "upload");
  CHECK(run["tags"]["branch"] == "main");
  CHECK(run["metrics"]["samples"]["total"] == 18);
  CHECK(run["top"]["self"][0]["name"] == "b");
  CHECK(run["top"]["total"][0]["name"] == "main");

  auto svg = c.Get(("/api/runs/" + std::to_string(id) + "/flamegraph.svg").c_str());
  REQUIRE(svg);
  CHECK(svg->status == 200);
  CHECK(svg->get_header_value("Content-Type") == "image/svg+xml");
  CHECK(svg->body.find("<svg") != std::string::npos);
  CHECK(svg->body.find("main (18 samples, 100") != std::string::npos);

  auto folded = c.Get(("/api/runs/" + std::to_string(id) + "/profile.folded").c_str());
  REQUIRE(folded);
  CHECK(folded->body == "main;a;b 10\nmain;a;c 5\nmain;d 3\n");
  auto focus = c.Get(("/api/runs/" + std::to_string(id) + "/profile.folded?focus=main;a").c_str());
  CHECK(focus->body == "main;a;b 10\nmain;a;c 5\n");
  auto focus_svg =
      c.Get(("/api/runs/" + std::to_string(id) + "/flamegraph.svg?focus=main;a").c_str());
  CHECK(focus_svg->body.find("a (15 samples, 100") != std::string::npos);

  json fns = body_json(c.Get(("/api/runs/" + std::to_string(id) + "/functions").c_str()));
  CHECK(fns["total"] == 18);
  CHECK(fns["functions"][0]["name"] == "b");
  CHECK(fns["functions"][0]["self"] == 10);

  json ss = body_json(c.Get(("/api/runs/" + std::to_string(id) + "/speedscope.json").c_str()));
  CHECK(ss["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  REQUIRE(ss["profiles"].size() == 1);
  const json& p = ss["profiles"][0];
  CHECK(p["type"] == "sampled");
  CHECK(p["samples"].size() == p["weights"].size());
  double sum = 0;
  for (const auto& w : p["weights"]) sum += w.get<double>();
  CHECK(sum == 18);
  for (const auto& s : p["samples"])
    for (const auto& f : s) CHECK(f.get<std::size_t>() < ss["shared"]["frames"].size());

  json list = body_json(c.Get("/api/runs?name=demo&tag=commit=abc"));
  CHECK(list["total"] == 1);
  CHECK(body_json(c.Get("/api/runs?tag=commit=zzz"))["total"] == 0);

  auto del = c.Delete(("/api/runs/" + std::to_string(id)).c_str());
  REQUIRE(del);
  CHECK(del->status == 204);
  CHECK(c.Get(("/api/runs/" + std::to_string(id)).c_str())->status == 404);
  CHECK(c.Get(("/api/runs/" + std::to_string(id) + "/flamegraph.svg").c_str())->status == 404);
  CHECK(c.Delete(("/api/runs/" + std::to_string(id)).c_str())->status == 404);
}

TEST_CASE("gzip bodies, ETag and 304, paging, units") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  auto c = srv.client();
  httplib::Headers gz = {{"Content-Encoding", "gzip"}};
  auto r = c.Post("/api/runs?name=gz&units=ns", gz, gzip(kFolded), "text/plain");
  REQUIRE(r);
  CHECK(r->status == 201);
  int64_t id = body_json(r)["id"];
  json run = body_json(c.Get(("/api/runs/" + std::to_string(id)).c_str()));
  CHECK(run["metrics"]["time"]["total"] == 18);
  CHECK(run["metrics"]["time"]["units"] == "ns");

  std::string path = "/api/runs/" + std::to_string(id) + "/flamegraph.svg?width=800";
  auto first = c.Get(path.c_str());
  std::string etag = first->get_header_value("ETag");
  CHECK(!etag.empty());
  auto again = c.Get(path.c_str(), {{"If-None-Match", etag}});
  CHECK(again->status == 304);
  CHECK(again->body.empty());
  auto other = c.Get((path + "&inverted=1").c_str(), {{"If-None-Match", etag}});
  CHECK(other->status == 200);
  CHECK(other->get_header_value("ETag") != etag);
  CHECK(c.Get(path.c_str())->body == first->body);  // cached copy is the same graph

  // Regression: httplib's own gzip took seconds on a large SVG; the server
  // compresses cached graphs once and sends them as they are.
  std::string big;
  for (int i = 0; i < 3000; ++i)
    big += "main;mod" + std::to_string(i % 40) + ";fn" + std::to_string(i) + " 3\n";
  int64_t big_id = upload(c, "name=big", big);
  std::string big_path = "/api/runs/" + std::to_string(big_id) + "/flamegraph.svg";
  auto plain = c.Get(big_path.c_str());
  for (int i = 0; i < 2; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto z = c.Get(big_path.c_str(), {{"Accept-Encoding", "gzip"}});  // the client decodes it
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(z);
    CHECK(z->get_header_value("Content-Encoding") == "gzip");
    CHECK(z->body == plain->body);
    CHECK(secs < 2.0);
  }
  auto zf = c.Get(("/api/runs/" + std::to_string(big_id) + "/profile.folded").c_str(),
                  {{"Accept-Encoding", "gzip"}});
  CHECK(zf->get_header_value("Content-Encoding") == "gzip");
  CHECK(zf->body.size() > 3000 * 10);

  for (int i = 0; i < 5; ++i) upload(c, "name=page&tag=i=" + std::to_string(i), "x;y 1\n");
  json page = body_json(c.Get("/api/runs?name=page&limit=2&offset=1"));
  CHECK(page["total"] == 5);
  REQUIRE(page["runs"].size() == 2);
  CHECK(page["runs"][0]["tags"]["i"] == "3");  // newest first: 4, [3, 2], 1, 0
}

TEST_CASE("bad input: every error code, nothing stored, never a 500") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path, {"--max-body", "64K", "--max-stacks", "50", "--max-tags", "3",
                                 "--max-depth", "10"});
  auto c = srv.client();
  int64_t good = upload(c, "name=good", kFolded);
  auto count_runs = [&] { return body_json(c.Get("/api/runs"))["total"].get<int>(); };

  auto bad = c.Post("/api/runs?name=bad", "main;a 1\nmain;b\nmain;c 2\n", "text/plain");
  CHECK(bad->status == 400);
  json e = body_json(bad);
  CHECK(e["line"] == 2);
  CHECK(e["reason"] == "no count");
  CHECK(e["error"].get<std::string>().find("line 2") != std::string::npos);

  struct Case {
    std::string target;
    std::string body;
    int status;
  };
  std::string deep = "f";
  for (int i = 0; i < 20; ++i) deep += ";f";
  std::string many;
  for (int i = 0; i < 60; ++i) many += "s" + std::to_string(i) + " 1\n";
  std::vector<Case> posts = {
      {"/api/runs?name=x", "a;b -1\n", 400},
      {"/api/runs?name=x", "a;b 1e5\n",
       400},  // ("a;;b 1" is drawn as flamegraph.pl draws it: accepted)
      {"/api/runs?name=x", std::string("a;b\x01 1\n"), 400},
      {"/api/runs?name=x", "a;\xff\xfe 1\n", 400},
      {"/api/runs?name=x", "a 1 2\n", 400},
      {"/api/runs?name=x", "", 400},
      {"/api/runs?name=x", deep + " 1\n", 400},
      {"/api/runs?name=x", "a;" + std::string(5000, 'z') + " 1\n", 400},
      {"/api/runs?name=x", many, 413},
      {"/api/runs?name=x&tag=a=1&tag=b=2&tag=c=3&tag=d=4", kFolded, 400},
      {"/api/runs?name=x&tag=novalue", kFolded, 400},
      {"/api/runs", kFolded, 400},
      {"/api/runs?name=x&units=parsecs", kFolded, 422},
      {"/api/runs?name=x&metric=speed", kFolded, 422},
      {"/api/runs?name=x", std::string(70 * 1024, 'a'), 413},
      {"/ingest?name=app.cpu&format=pprof", kFolded, 400},  // not a pprof profile
      {"/ingest?name=app.cpu&format=jfr", kFolded, 422},
      {"/ingest?name=app.cpu&aggregationType=median", kFolded, 422},
      {"/ingest?name=app.cpu&from=yesterday", kFolded, 422},
      {"/ingest?name=app.cpu&from=200&until=100", kFolded, 422},
      {"/ingest?name=app{bad", kFolded, 400},
      {"/ingest", kFolded, 400},
      {"/api/streams", "not json", 400},
      {"/api/streams", R"({"name":"x","metrics":["samples"]})", 400},
      {"/api/streams", R"({"stream":"u","name":"x","metrics":["joules"]})", 422},
      {"/api/runs/999/chunks", chunk(0, 0, 0, {{{"a"}, 1}}), 404},
      {"/api/runs/999/finish", "", 404},
  };
  for (const Case& k : posts) {
    CAPTURE(k.target);
    auto pc = srv.client();  // a 413 may close the connection
    auto res = pc.Post(k.target.c_str(), k.body, "text/plain");
    REQUIRE(res);
    CAPTURE(res->body);
    CHECK(res->status == k.status);
    CHECK(body_json(res).contains("error"));
  }
  // gzip bomb: small on the wire, over the limit decoded
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += "main;a;b 1\n";
  auto bomb =
      c.Post("/api/runs?name=bomb", {{"Content-Encoding", "gzip"}}, gzip(lines), "text/plain");
  REQUIRE(bomb);
  CHECK(bomb->status == 413);
  CHECK(count_runs() == 1);  // only "good"

  std::string g = "/api/runs/" + std::to_string(good);
  std::vector<std::pair<std::string, int>> gets = {
      {"/api/runs/12345", 404},
      {"/api/runs/abc", 404},
      {"/api/runs/12345/flamegraph.svg", 404},
      {"/api/nothing", 404},
      {g + "/flamegraph.svg?metric=joules", 422},
      {g + "/flamegraph.svg?colors=plaid", 422},
      {g + "/flamegraph.svg?width=-5", 422},
      {g + "/flamegraph.svg?minwidth=x%", 422},
      {g + "/flamegraph.svg?inverted=maybe", 422},
      {g + "/flamegraph.svg?from=soon", 422},
      {g + "/flamegraph.svg?from=10&until=5", 422},
      {g + "/timeline?step=-1", 422},
      {g + "/functions?limit=0", 422},
      {"/api/runs?limit=100000", 422},
      {"/api/runs?status=sleeping", 422},
      {"/api/diff?base=1", 422},
      {"/api/diff?base=x&head=1", 422},
      {"/api/diff?base=" + std::to_string(good) + "&head=777", 404},
      {"/api/diff?base_name=nobody&head=" + std::to_string(good), 404},
      {"/api/diff?base=" + std::to_string(good) + "&head=" + std::to_string(good) +
           "&threshold=lots",
       422},
      {"/api/diff.svg?base=" + std::to_string(good) + "&head=" + std::to_string(good) +
           "&normalize=2",
       422},
  };
  for (const auto& [target_ref, status] : gets) {
    const auto& target = target_ref;  // CAPTURE's lambda: clang-tidy 14 rejects a binding there
    CAPTURE(target);
    auto res = c.Get(target.c_str());
    REQUIRE(res);
    CHECK(res->status == status);
    CHECK(body_json(res).contains("error"));
  }
  CHECK(c.Delete("/api/runs/4242")->status == 404);
  CHECK(count_runs() == 1);
  CHECK(srv.log().find(" 500 ") == std::string::npos);
}

TEST_CASE("token: writes need it, reads do not") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path, {"--token", "s3cret"});
  auto c = srv.client();
  CHECK(c.Post("/api/runs?name=x", kFolded, "text/plain")->status == 401);
  CHECK(c.Post("/api/runs?name=x", {{"Authorization", "Bearer wrong"}}, kFolded, "text/plain")
            ->status == 401);
  CHECK(c.Post("/ingest?name=a.cpu", kFolded, "text/plain")->status == 401);
  CHECK(c.Post("/api/streams", R"({"stream":"u","name":"x"})", "application/json")->status == 401);
  auto ok = c.Post("/api/runs?name=x", {{"Authorization", "Bearer s3cret"}}, kFolded, "text/plain");
  REQUIRE(ok);
  CHECK(ok->status == 201);
  int64_t id = body_json(ok)["id"];
  CHECK(c.Delete(("/api/runs/" + std::to_string(id)).c_str())->status == 401);
  CHECK(c.Get(("/api/runs/" + std::to_string(id)).c_str())->status == 200);
  CHECK(body_json(c.Get("/api/runs"))["total"] == 1);
}

TEST_CASE("a streamed run: idempotent create, seq dedupe, live view, time windows, finish, 409") {
  lft::TempDir dir;
  // Every resolution kept forever: these chunks are of 1970, past the default keeps, and the
  // retention pass the server runs at start trimmed them when it came after the uploads (seen
  // once the harness no longer polled for a port, so the uploads came sooner). For the same
  // reason no stale pass: a run started in 1970 has had "no data for an hour" at once.
  lft::ServerProc srv(dir.path,
                      {"--resolutions", "1s:0,10s:0,1m:0,10m:0,1h:0,1d:0", "--stale-minutes", "0"});
  auto c = srv.client();
  std::string create =
      R"({"stream":"0b7c-uuid","name":"svc","tags":{"host":"a"},"metrics":["samples"],
                           "started_ns":100000000000,"hz":999})";
  auto r1 = c.Post("/api/streams", create, "application/json");
  REQUIRE(r1);
  CHECK(r1->status == 201);
  int64_t id = body_json(r1)["id"];
  auto r2 = c.Post("/api/streams", create, "application/json");
  CHECK(r2->status == 200);
  CHECK(body_json(r2)["id"] == id);
  std::string base = "/api/runs/" + std::to_string(id);
  const uint64_t s = 1000000000ull;
  auto c0 = chunk(0, 100 * s, 105 * s, {{{"main", "work"}, 10}, {{"main", "idle"}, 2}});
  auto c1 = chunk(1, 105 * s, 110 * s, {{{"main", "work"}, 4}, {{"main", "gc"}, 6}});
  json a0 = body_json(c.Post((base + "/chunks").c_str(), c0, "text/plain"));
  CHECK(a0["seq"] == 0);
  CHECK(a0["duplicate"] == false);
  json dup = body_json(c.Post((base + "/chunks").c_str(), c0, "text/plain"));
  CHECK(dup["duplicate"] == true);
  CHECK(c.Post((base + "/chunks").c_str(), {{"Content-Encoding", "gzip"}}, gzip(c1), "text/plain")
            ->status == 200);

  json live = body_json(c.Get(base.c_str()));
  CHECK(live["status"] == "live");
  CHECK(live["metrics"]["samples"]["total"] == 22);
  CHECK(live["hz"] == 999);
  auto svg = c.Get((base + "/flamegraph.svg").c_str());
  CHECK(svg->status == 200);
  const std::string live_etag = svg->get_header_value("ETag");
  CHECK(!live_etag.empty());  // live: cached per revision
  CHECK(body_json(c.Get("/api/runs?status=live"))["total"] == 1);

  auto window = c.Get((base + "/profile.folded?from=105&until=110").c_str());
  CHECK(window->body == "main;gc 6\nmain;work 4\n");
  json tl = body_json(c.Get((base + "/timeline?step=5").c_str()));
  CHECK(tl["step_ns"] == 5 * s);
  CHECK(tl["from_ns"] == 100 * s);
  REQUIRE(tl["values"].size() >= 2);
  CHECK(tl["values"][0] == 12);
  CHECK(tl["values"][1] == 10);

  auto fin = c.Post((base + "/finish").c_str(), R"({"stats":{"samples_delivered":22}})",
                    "application/json");
  CHECK(fin->status == 200);
  json done = body_json(c.Get(base.c_str()));
  CHECK(done["status"] == "finished");
  CHECK(c.Get((base + "/flamegraph.svg").c_str())->get_header_value("ETag") !=
        live_etag);  // finish: a new revision
  CHECK(done["stats"]["samples_delivered"] == 22);
  auto late =
      c.Post((base + "/chunks").c_str(), chunk(2, 111 * s, 112 * s, {{{"main"}, 1}}), "text/plain");
  CHECK(late->status == 409);
  CHECK(body_json(c.Get(base.c_str()))["metrics"]["samples"]["total"] == 22);
  CHECK(c.Post((base + "/chunks").c_str(), "luaflame-wire 2\nseq 3\n", "text/plain")->status ==
        409);
}

TEST_CASE("pyroscope /ingest: names, labels, formats, time windows") {
  lft::TempDir dir;
  // Every resolution kept forever: data of 2023 is past the default keeps, so the retention
  // pass the server runs at start trimmed it when that pass came after the uploads (seen once
  // in the sanitizer job: the time window read back empty).
  lft::ServerProc srv(dir.path,
                      {"--resolutions", "1s:0,10s:0,1m:0,10m:0,1h:0,1d:0", "--stale-minutes", "0"});
  auto c = srv.client();
  auto r = c.Post(
      "/ingest?name=shop.cpu{env=staging,region=eu}&from=1700000000&until=1700000010"
      "&sampleRate=100&spyName=rbspy&units=samples&aggregationType=sum",
      "main;a 3\nmain;b 2\n", "text/plain");
  REQUIRE(r);
  CAPTURE(r->body);
  CHECK(r->status == 200);
  int64_t id = body_json(r)["id"];
  auto r2 = c.Post(
      "/ingest?name=shop.cpu{region=eu,env=staging}&from=1700000010&until=1700000020&format=lines",
      "main;a\nmain;a\nmain;c\n", "text/plain");
  CHECK(r2->status == 200);
  CHECK(body_json(r2)["id"] == id);  // same series, same day: one run
  json run = body_json(c.Get(("/api/runs/" + std::to_string(id)).c_str()));
  CHECK(run["name"] == "shop");
  CHECK(run["source"] == "ingest");
  CHECK(run["tags"]["env"] == "staging");
  CHECK(run["tags"]["spy"] == "rbspy");
  CHECK(run["hz"] == 100);
  CHECK(run["metrics"]["samples"]["total"] == 8);
  CHECK(run["started_ns"] == 1700000000000000000LL);
  auto part =
      c.Get(("/api/runs/" + std::to_string(id) + "/profile.folded?from=1700000010&until=1700000020")
                .c_str());
  CHECK(part->body == "main;a 2\nmain;c 1\n");
  auto mem = c.Post(
      "/ingest?name=shop.alloc_space{env=staging,region=eu}&from=1700000000&until=1700000010&units="
      "bytes",
      "main;alloc 4096\n", "text/plain");
  CHECK(body_json(mem)["id"] == id);
  auto msvg =
      c.Get(("/api/runs/" + std::to_string(id) + "/flamegraph.svg?metric=alloc_bytes").c_str());
  CHECK(msvg->status == 200);
  CHECK(msvg->body.find("KiB") != std::string::npos);
}

TEST_CASE("diff: JSON with markdown, threshold gives 412, base by name and tag, SVG") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  auto c = srv.client();
  int64_t main1 = upload(c, "name=app&tag=branch=main", "main;fast 90\nmain;slow 10\n");
  int64_t main2 = upload(c, "name=app&tag=branch=main", "main;fast 80\nmain;slow 20\n");
  upload(c, "name=app&tag=branch=dev", "main;fast 1\n");
  int64_t head = upload(c, "name=app&tag=branch=feature", "main;fast 50\nmain;slow 50\n");
  std::string q = "/api/diff?base=" + std::to_string(main2) + "&head=" + std::to_string(head);
  auto ok = c.Get((q + "&threshold=40").c_str());
  CHECK(ok->status == 200);
  json d = body_json(ok);
  CHECK(d["failed"] == false);
  CHECK(d["regressions"][0]["name"] == "slow");
  CHECK(d["regressions"][0]["delta_pct"] == 30);
  CHECK(d["improvements"][0]["name"] == "fast");
  CHECK(d["markdown"].get<std::string>().find("| slow | 20.00 | 50.00 | +30.00 |") !=
        std::string::npos);
  auto fail = c.Get((q + "&threshold=25").c_str());
  CHECK(fail->status == 412);
  CHECK(body_json(fail)["failed"] == true);
  json byname = body_json(
      c.Get(("/api/diff?base_name=app&base_tag=branch=main&head=" + std::to_string(head)).c_str()));
  CHECK(byname["base"] == main2);
  CHECK(byname["base"] != main1);
  // head by name and tag: the newest such run, in the same request (what `luaflame compare` sends)
  json headname = body_json(
      c.Get("/api/diff?base_name=app&base_tag=branch=main&head_name=app&head_tag=branch=feature"));
  CHECK(headname["head"] == head);
  CHECK(headname["base"] == main2);
  CHECK(c.Get("/api/diff?base_name=app&head_name=app&head_tag=branch=none")->status == 404);
  CHECK(c.Get(("/api/diff?base=1&head_name=app&head=" + std::to_string(head)).c_str())->status ==
        422);
  CHECK(c.Get((q + "&threshold=25%25").c_str())->status == 412);  // "25%", as the CLI accepts it
  auto svg = c.Get(
      ("/api/diff.svg?base=" + std::to_string(main2) + "&head=" + std::to_string(head)).c_str());
  CHECK(svg->status == 200);
  CHECK(svg->body.find("<svg") != std::string::npos);
}

TEST_CASE("concurrent uploads and reads all succeed and add up") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  std::atomic<int> created{0}, read_ok{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto c = srv.client();
      for (int i = 0; i < 25; ++i) {
        std::string body;
        for (int k = 0; k < 200; ++k)
          body += "main;t" + std::to_string(t) + ";f" + std::to_string(k) + " 1\n";
        auto r =
            c.Post(("/api/runs?name=conc&tag=t=" + std::to_string(t)).c_str(), body, "text/plain");
        if (r && r->status == 201)
          ++created;
        else
          ++failures;
      }
    });
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      auto c = srv.client();
      while (created + failures < 100) {
        auto l = c.Get("/api/runs?limit=5");
        if (!l || l->status != 200) {
          ++failures;
          continue;
        }
        json j = json::parse(l->body);
        for (const auto& run : j["runs"]) {
          auto s =
              c.Get(("/api/runs/" + std::to_string(run["id"].get<int64_t>()) + "/flamegraph.svg")
                        .c_str());
          if (s && s->status == 200)
            ++read_ok;
          else
            ++failures;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(created == 100);
  auto c = srv.client();
  json all = body_json(c.Get("/api/runs?name=conc&limit=1000"));
  CHECK(all["total"] == 100);
  for (const auto& run : all["runs"]) CHECK(run["metrics"]["samples"]["total"] == 200);
  MESSAGE("svg reads during uploads: " << read_ok.load());
}

TEST_CASE("pages, static files, healthz, metrics, clean SIGTERM") {
  lft::TempDir dir, web;
  for (const char* f : {"index.html", "run.html", "compare.html", "upload.html"}) {
    std::ofstream(web.path + "/" + f) << "<!doctype html><title>" << f << "</title>";
  }
  std::ofstream(web.path + "/app.js") << "export const x = 1;";
  std::ofstream(web.path + "/style.css") << "body{}";
  lft::ServerProc srv(dir.path, {"--web", web.path});
  auto c = srv.client();
  struct Page {
    const char* path;
    const char* file;
  };
  for (Page p : {Page{"/", "index.html"}, Page{"/runs/12", "run.html"},
                 Page{"/compare", "compare.html"}, Page{"/upload", "upload.html"}}) {
    CAPTURE(p.path);
    auto r = c.Get(p.path);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("Content-Type").find("text/html") == 0);
    CHECK(r->body.find(p.file) != std::string::npos);
  }
  auto js = c.Get("/static/app.js");
  CHECK(js->status == 200);
  CHECK(js->get_header_value("Content-Type").find("text/javascript") == 0);
  CHECK(c.Get("/static/style.css")->get_header_value("Content-Type").find("text/css") == 0);
  CHECK(c.Get("/static/missing.js")->status == 404);
  CHECK(c.Get("/static/../server-" + std::to_string(srv.port()) + ".log")->status == 404);

  CHECK(body_json(c.Get("/healthz"))["status"] == "ok");
  upload(c, "name=m", kFolded);
  // The access log and request metrics are written just after the response
  // is sent, so the upload's count may land a moment after its 201.
  auto m = c.Get("/metrics");
  for (int i = 0; i < 50 && m && m->body.find("status=\"201\"") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = c.Get("/metrics");
  }
  REQUIRE(m);
  CHECK(m->get_header_value("Content-Type").find("text/plain") == 0);
  const std::string bytes = "luaflame_ingested_bytes_total " + std::to_string(std::strlen(kFolded));
  for (std::string want :
       {std::string("luaflame_runs{status=\"finished\"} 1"), std::string("luaflame_stored_bytes "),
        bytes, std::string("luaflame_ingested_lines_total 3"),
        std::string("luaflame_http_requests_total{route=\"/api/runs "
                    "POST\",method=\"POST\",status=\"201\"} 1"),
        std::string("luaflame_http_request_duration_seconds_bucket{route=\"/healthz\"")}) {
    CAPTURE(want);
    CHECK(m->body.find(want) != std::string::npos);
  }
  CHECK(srv.log().find("POST /api/runs 201") != std::string::npos);  // access log with status
  CHECK(srv.stop(SIGTERM) == 0);
  CHECK(srv.log().find("store closed") != std::string::npos);
}

TEST_CASE("retention over HTTP: --keep-runs keeps the newest") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path, {"--keep-runs", "2", "--retention-interval", "1"});
  auto c = srv.client();
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(upload(c, "name=keep", kFolded));
  json list;
  for (int i = 0; i < 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    list = body_json(c.Get("/api/runs?name=keep"));
    if (list["total"] == 2) break;
  }
  CHECK(list["total"] == 2);
  REQUIRE(list["runs"].size() == 2);
  CHECK(list["runs"][0]["id"] == ids[3]);
  CHECK(list["runs"][1]["id"] == ids[2]);
}

// Idle is by when data arrived, not by the data's own times. The pass judged by the latter: a
// stream backfilling samples older than --stale-minutes was finished between two of its chunks,
// and the rest were refused (409) and lost.
TEST_CASE("a live run that gets no data for --stale-minutes is finished; old data times do not") {
  lft::TempDir dir;
  // 0.05 minutes: 3 s; a retention pass each second; every resolution kept (the chunks are of
  // 1970, past the default keeps).
  lft::ServerProc srv(dir.path, {"--retention-interval", "1", "--stale-minutes", "0.05",
                                 "--resolutions", "1s:0,10s:0,1m:0,10m:0,1h:0,1d:0"});
  auto c = srv.client();
  auto open = [&](const char* body) {
    return "/api/runs/" +
           std::to_string(
               body_json(c.Post("/api/streams", body, "application/json"))["id"].get<int64_t>());
  };
  const std::string idle = open(R"({"stream":"idle","name":"stale","metrics":["samples"]})");
  const std::string backfill =
      open(R"({"stream":"backfill","name":"stale","metrics":["samples"],"started_ns":1000000000})");
  // 6 s of chunks of 1970, one every 0.3 s: twice the idle time, never refused.
  const uint64_t s = 1000000000ull;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  uint64_t seq = 0;
  while (std::chrono::steady_clock::now() < end) {
    auto r = c.Post((backfill + "/chunks").c_str(),
                    chunk(seq, (1 + seq) * s, (2 + seq) * s, {{{"main", "old"}, 1}}), "text/plain");
    REQUIRE(r);
    CHECK_MESSAGE(r->status == 200, "chunk ", seq, ": ", r->status, " ", r->body);
    ++seq;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  CHECK(body_json(c.Get(backfill.c_str()))["status"] == "live");
  CHECK(body_json(c.Get(backfill.c_str()))["metrics"]["samples"]["total"] == seq);
  CHECK(body_json(c.Get(idle.c_str()))["status"] == "finished");
  // Once its chunks stop, the backfill is idle too.
  for (int i = 0; i < 80 && body_json(c.Get(backfill.c_str()))["status"] != "finished"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(body_json(c.Get(backfill.c_str()))["status"] == "finished");
}

// Regression: httplib's default socket options set SO_REUSEPORT, so a second
// server bound the same port and the kernel split connections between two stores.
TEST_CASE("a second server on a port in use exits non-zero and says so") {
  lft::TempDir dir, dir2;
  lft::ServerProc first(dir.path);
  int64_t id = [&] {
    auto c = first.client();
    return upload(c, "name=first", kFolded);
  }();
  const std::string where = "127.0.0.1:" + std::to_string(first.port());
  const std::string err_path = dir2.path + "/second.err";
  const std::string bin = lft::server_bin();  // made before fork: the child may not allocate
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid == 0) {
    if (err_fd >= 0) {
      dup2(err_fd, 1);
      dup2(err_fd, 2);
    }
    execl(bin.c_str(), bin.c_str(), "--listen", where.c_str(), "--data", dir2.path.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  if (err_fd >= 0) ::close(err_fd);
  REQUIRE(pid > 0);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 300 && !exited; ++i) {  // at most 15 s
    exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::ifstream in(err_path);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CAPTURE(err);
  REQUIRE(exited);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(err.find(where + " is in use") != std::string::npos);
  CHECK(!std::filesystem::exists(dir2.path + "/luaflame.db"));  // the store was not touched
  // The first server still answers every connection, with its own run.
  for (int i = 0; i < 20; ++i) {
    auto c = first.client();
    auto r = c.Get(("/api/runs/" + std::to_string(id)).c_str());
    REQUIRE(r);
    CHECK(r->status == 200);
  }
}

namespace {

// Sends `request` on a new connection to 127.0.0.1:port and reads until the
// server closes it or `seconds` pass; `closed` tells which.
std::string raw_exchange(int port, const std::string& request, int seconds, bool& closed) {
  int fd = lft::connect_loopback(port);
  REQUIRE(fd >= 0);
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (std::size_t off = 0; off < request.size();) {
    ssize_t n = send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  std::string got;
  char buf[4096];
  closed = false;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) {
      closed = true;
      break;
    }
    if (n < 0) break;  // timeout: still open
    got.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return got;
}

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

// Regression: after a 413 httplib kept the connection open and read the rest
// of the refused body as a new request (a stray 400 in the log).
TEST_CASE("a 413 closes the connection: the rest of the body is not read as a request") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path, {"--max-body", "64K", "--token", "T"});
  std::string line = "main;a;b 1\n";
  std::string chunked;  // 160 KB in 1 KB chunks, over the 64 KB limit
  for (int i = 0; i < 160; ++i) {
    std::string part;
    while (part.size() < 1000) part += line;
    char head[32];
    std::snprintf(head, sizeof head, "%zx\r\n", part.size());
    chunked += head + part + "\r\n";
  }
  chunked += "0\r\n\r\n";
  struct Case {
    std::string name, headers, body, status;
  };
  std::string big(100 * 1024, 'x');
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += line;
  std::string bomb = gzip(lines);
  std::vector<Case> cases = {
      {"chunked over the limit", "Transfer-Encoding: chunked\r\nAuthorization: Bearer T\r\n",
       chunked, "413"},
      {"Content-Length over the limit",
       "Content-Length: " + std::to_string(big.size()) + "\r\nAuthorization: Bearer T\r\n", big,
       "413"},
      {"gzip over the limit decoded",
       "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(bomb.size()) +
           "\r\nAuthorization: Bearer T\r\n",
       bomb, "413"},
      {"/api/streams chunked over the limit",
       "Transfer-Encoding: chunked\r\nAuthorization: Bearer T\r\n", chunked, "413"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    std::string target = k.name.rfind("/api/streams", 0) == 0 ? "/api/streams" : "/api/runs?name=x";
    std::string req = "POST " + target +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n" + k.headers +
                      "\r\n" + k.body;
    bool closed = false;
    std::string got = raw_exchange(srv.port(), req, 10, closed);
    CAPTURE(got.substr(0, 400));
    CHECK(got.rfind("HTTP/1.1 " + k.status, 0) == 0);
    CHECK(got.find("Connection: close") != std::string::npos);
    CHECK(count_of(got, "HTTP/1.1 ") == 1);  // no second answer to the rest of the body
    CHECK(closed);
    CHECK(got.find("\"error\"") != std::string::npos);
  }
  // A good upload on a kept-alive connection still works, and nothing stray was logged.
  auto c = srv.client();
  c.set_bearer_token_auth("T");
  upload(c, "name=ok", kFolded);
  std::string log = srv.log();
  CHECK(log.find(" 400 ") == std::string::npos);
  CHECK(count_of(log, " 413 ") == cases.size());
}

// Regression: every diff.svg of two finished runs was rendered again (the
// graphs of single runs were cached, comparisons were not).
TEST_CASE("diff.svg of two finished runs is cached with an ETag, and dropped with its runs") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  auto c = srv.client();
  int64_t base = upload(c, "name=app", "main;work 20\nmain;slow 20\nmain;fast 60\n");
  int64_t head = upload(c, "name=app", "main;work 20\nmain;slow 50\nmain;fast 30\n");
  auto hits = [&] {
    std::string m = c.Get("/metrics")->body;
    auto p = m.find("\nluaflame_svg_cache_hits_total ");
    REQUIRE(p != std::string::npos);
    return std::stoll(m.substr(p + 31));
  };
  const std::string q =
      "/api/diff.svg?base=" + std::to_string(base) + "&head=" + std::to_string(head);
  int64_t h0 = hits();
  auto first = c.Get(q.c_str());
  REQUIRE(first);
  REQUIRE(first->status == 200);
  CHECK(first->body.find("<svg") != std::string::npos);
  std::string etag = first->get_header_value("ETag");
  REQUIRE(!etag.empty());
  auto again = c.Get(q.c_str());
  CHECK(again->body == first->body);
  CHECK(hits() == h0 + 1);
  auto revalidated = c.Get(q.c_str(), {{"If-None-Match", etag}});
  CHECK(revalidated->status == 304);
  // Another option, or the base named by name, is its own entry.
  auto wide = c.Get((q + "&width=800").c_str());
  CHECK(wide->status == 200);
  CHECK(wide->get_header_value("ETag") != etag);
  auto named = c.Get(("/api/diff.svg?base_name=app&head=" + std::to_string(head)).c_str());
  CHECK(named->status == 200);
  CHECK(named->body.find("vs #" + std::to_string(base)) != std::string::npos);
  // Deleting either run drops the comparison.
  REQUIRE(c.Delete(("/api/runs/" + std::to_string(base)).c_str())->status == 204);
  CHECK(c.Get(q.c_str())->status == 404);
  int64_t h1 = hits();
  int64_t base2 = upload(c, "name=app", "main;work 50\nmain;fast 50\n");
  auto fresh = c.Get(
      ("/api/diff.svg?base=" + std::to_string(base2) + "&head=" + std::to_string(head)).c_str());
  REQUIRE(fresh->status == 200);
  CHECK(fresh->body != first->body);
  CHECK(hits() == h1);
}

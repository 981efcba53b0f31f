// Deployment defaults (issue 12): --token-file, --read-token, cross-site
// writes, --public-url instead of Host, escaped log lines, static files only
// from inside the web folder.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common.hpp"

using nlohmann::json;

namespace {

std::string post(const std::string& path, const std::string& body, const std::string& extra,
                 const char* type = "text/plain") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "Connection: close\r\n\r\n" + body;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "Connection: close\r\n\r\n";
}

std::string body_of(const std::string& raw) {
  auto p = raw.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : raw.substr(p + 4);
}

}  // namespace

TEST_CASE("--token-file keeps the token out of ps; --read-token protects reads, not /healthz") {
  lft::TempDir dir;
  std::string tf = dir.path + "/token", rf = dir.path + "/read";
  std::ofstream(tf) << "s3cret-write\n";
  std::ofstream(rf) << "s3cret-read\n";
  lft::ServerProc s(dir.path + "/data", {"--token-file", tf, "--read-token-file", rf});
  std::ifstream cmd("/proc/" + std::to_string(s.pid()) + "/cmdline");
  std::string cmdline((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
  CHECK(cmdline.find("s3cret") == std::string::npos);
  std::string raw = lfh::exchange(s.port(), post("/api/runs?name=a", "main 1\n", ""));
  CHECK(lfh::status_of(raw) == 401);
  raw = lfh::exchange(
      s.port(), post("/api/runs?name=a", "main 1\n", "Authorization: Bearer s3cret-write\r\n"));
  CHECK(lfh::status_of(raw) == 201);
  raw = lfh::exchange(s.port(), get("/api/runs"));
  CAPTURE(raw);
  CHECK(lfh::status_of(raw) == 401);
  CHECK(raw.find("WWW-Authenticate: Basic") != std::string::npos);
  CHECK(body_of(raw).find("reads need the read token") != std::string::npos);
  CHECK(lfh::status_of(lfh::exchange(s.port(), get("/static/app.css"))) == 401);
  CHECK(lfh::status_of(lfh::exchange(
            s.port(), get("/api/runs", "Authorization: Bearer s3cret-read\r\n"))) == 200);
  CHECK(lfh::status_of(lfh::exchange(
            s.port(), get("/api/runs", "Authorization: Bearer s3cret-write\r\n"))) == 200);
  // Basic, any user name: "me:s3cret-read"
  CHECK(lfh::status_of(lfh::exchange(
            s.port(), get("/api/runs", "Authorization: Basic bWU6czNjcmV0LXJlYWQ=\r\n"))) == 200);
  // Issue 31: writes take the bearer token only. A browser attaches Basic
  // credentials it has cached by itself, to a cross-site page's form too.
  // "me:s3cret-write"
  raw = lfh::exchange(s.port(), post("/api/runs?name=a", "main 1\n",
                                     "Authorization: Basic bWU6czNjcmV0LXdyaXRl\r\n"));
  CHECK(lfh::status_of(raw) == 401);
  CHECK(lfh::status_of(
            lfh::exchange(s.port(), get("/api/runs", "Authorization: Bearer wrong\r\n"))) == 401);
  lfh::check_healthz_prompt(s);
}

// Issue 31: nosniff and a Content-Security-Policy on every answer: pages
// run their own scripts only, a standalone SVG its inline script in a
// sandbox, the rest nothing; refusals of the front loop included.
TEST_CASE("every answer carries nosniff and a Content-Security-Policy") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path);
  REQUIRE(lfh::status_of(lfh::exchange(s.port(), post("/api/runs?name=h", "main;f 3\n", ""))) ==
          201);
  struct Case {
    std::string request;
    int status;
    const char* csp;  ///< a part the policy must hold
  };
  const Case cases[] = {
      {get("/"), 200, "script-src 'self'; style-src"},
      {get("/runs/1"), 200, "frame-ancestors 'none'"},
      {get("/static/js/run.js"), 200, "default-src 'self'"},
      {get("/api/runs"), 200, "default-src 'none'"},
      {get("/api/runs/1/flamegraph.svg"), 200, "sandbox allow-scripts"},
      {get("/api/runs/999"), 404, "default-src 'none'"},
      {get("/no/such/page"), 404, "default-src 'none'"},
      // refused by the front loop before httplib sees it
      {"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 9a\r\n\r\n", 400,
       "default-src 'none'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.request);
    const std::string raw = lfh::exchange(s.port(), c.request);
    CHECK(lfh::status_of(raw) == c.status);
    const std::string head = raw.substr(0, raw.find("\r\n\r\n"));
    CHECK(head.find("\r\nX-Content-Type-Options: nosniff") != std::string::npos);
    CHECK(head.find("\r\nContent-Security-Policy: ") != std::string::npos);
    CHECK(head.find(c.csp) != std::string::npos);
    CHECK(head.find("unsafe-eval") == std::string::npos);
  }
}

TEST_CASE(
    "cross-site simple writes are refused without a token; curl, JSON and same-origin writes "
    "pass") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--public-url", "https://flames.example.com"});
  const std::string evil = "Origin: https://evil.example\r\n";
  std::string raw = lfh::exchange(s.port(), post("/api/runs?name=csrf", "main 1\n", evil));
  CAPTURE(raw);
  CHECK(lfh::status_of(raw) == 403);
  CHECK(body_of(raw).find("cross-site write refused") != std::string::npos);
  raw = lfh::exchange(
      s.port(), post("/api/runs?name=csrf", "main 1\n", evil, "application/x-www-form-urlencoded"));
  CHECK(lfh::status_of(raw) == 403);
  raw = lfh::exchange(s.port(),
                      post("/api/runs?name=csrf", "main 1\n", "Sec-Fetch-Site: cross-site\r\n"));
  CHECK(lfh::status_of(raw) == 403);
  raw = lfh::exchange(
      s.port(), "DELETE /api/runs/1 HTTP/1.1\r\nHost: x\r\n" + evil + "Connection: close\r\n\r\n");
  CHECK(lfh::status_of(raw) == 403);
  auto c = s.client();
  auto none = c.Get("/api/runs?name=csrf");
  REQUIRE(none);
  CHECK(json::parse(none->body)["runs"].empty());
  // Not refused: no Origin (curl, agents), a custom header, the public origin.
  CHECK(lfh::status_of(lfh::exchange(s.port(), post("/api/runs?name=ok", "main 1\n", ""))) == 201);
  CHECK(lfh::status_of(lfh::exchange(
            s.port(), post("/api/runs?name=ok", "main 1\n", evil + "X-Luaflame: 1\r\n"))) == 201);
  CHECK(lfh::status_of(lfh::exchange(s.port(), post("/api/runs?name=ok", "main 1\n",
                                                    "Origin: https://flames.example.com\r\n"))) ==
        201);
  // Links use --public-url, never the Host header.
  raw =
      lfh::exchange(s.port(),
                    "POST /api/runs?name=h HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 7\r\n"
                    "Connection: close\r\n\r\nmain 1\n");
  json j = json::parse(body_of(raw));
  CHECK(j["url"].get<std::string>().rfind("https://flames.example.com/runs/", 0) == 0);
  CHECK(raw.find("evil.example") == std::string::npos);
  lfh::check_healthz_prompt(s);
}

TEST_CASE("without --public-url links come from --listen, not from Host") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path);
  std::string raw =
      lfh::exchange(s.port(),
                    "POST /api/runs?name=h HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 7\r\n"
                    "Connection: close\r\n\r\nmain 1\n");
  CAPTURE(raw);
  json j = json::parse(body_of(raw));
  CHECK(j["url"].get<std::string>().rfind("http://127.0.0.1:" + std::to_string(s.port()) + "/runs/",
                                          0) == 0);
}

TEST_CASE("control characters in a request path are escaped in the log") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path);
  lfh::exchange(s.port(), get("/x%0a[info]%20forged%1b[31m"));
  std::string log = s.log();
  CHECK(log.find("\\x0a[info] forged\\x1b[31m") != std::string::npos);
  CHECK(log.find('\x1b') == std::string::npos);
  CHECK(log.find("\n[info] forged") == std::string::npos);
  lfh::check_healthz_prompt(s);
}

TEST_CASE("static files only from inside the web folder: no symlink escape, no %00") {
  lft::TempDir dir;
  std::string web = dir.path + "/web";
  std::filesystem::create_directories(web + "/js");
  std::ofstream(web + "/app.css") << "body{}\n";
  std::ofstream(web + "/index.html") << "<html></html>\n";
  std::filesystem::create_symlink("/etc/passwd", web + "/passwd");
  std::filesystem::create_directory_symlink("/etc", web + "/etc");
  lft::ServerProc s(dir.path + "/data", {"--web", web});
  std::string raw = lfh::exchange(s.port(), get("/static/app.css"));
  CHECK(lfh::status_of(raw) == 200);
  CHECK(raw.find("text/css") != std::string::npos);
  for (const char* p : {"/static/passwd", "/static/etc/passwd", "/static/app.css%00.js",
                        "/static/..%2f..%2fetc%2fpasswd", "/static/%2e%2e/%2e%2e/etc/passwd",
                        "/static//etc/passwd"}) {
    CAPTURE(p);
    raw = lfh::exchange(s.port(), get(p));
    CHECK(lfh::status_of(raw) == 404);
    CHECK(raw.find("root:") == std::string::npos);
    CHECK(raw.find("text/javascript") == std::string::npos);
  }
  lfh::check_healthz_prompt(s);
}

// Issue 31: the error for GET /api/runs/%00 was cut at the NUL ("no run '"),
// and strtoll read "1%00x" as run 1.
TEST_CASE("run ids are digits, all of them: a NUL is named, never cut at or read past") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path);
  auto c = s.client();
  auto up = c.Post("/api/runs?name=t", "main;a 1\n", "text/plain");
  REQUIRE(up);
  REQUIRE(up->status == 201);
  const std::string id = std::to_string(nlohmann::json::parse(up->body)["id"].get<int64_t>());
  struct Case {
    std::string path, error;
  };
  for (const Case& k : {Case{"/api/runs/%00", "no run '\\x00'"},
                        Case{"/api/runs/" + id + "%00x", "no run '" + id + "\\x00x'"},
                        Case{"/api/runs/+" + id, "no run '+" + id + "'"},
                        Case{"/api/runs/%20" + id, "no run ' " + id + "'"}}) {
    CAPTURE(k.path);
    std::string raw = lfh::exchange(s.port(), get(k.path));
    CHECK(lfh::status_of(raw) == 404);
    CHECK(nlohmann::json::parse(body_of(raw))["error"] == k.error);
  }
  CHECK(lfh::status_of(lfh::exchange(s.port(), get("/api/runs/" + id))) == 200);
  lfh::check_healthz_prompt(s);
}

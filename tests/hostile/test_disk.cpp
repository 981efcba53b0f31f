// A full disk (issue 12): writes get 507 with the reason, a DELETE still
// frees space (the reserve file is released when the disk fills), and the
// server takes uploads again without a restart. Runs on an 8 MiB tmpfs (root
// only: the test is skipped, exit 77, when it cannot mount).
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "common.hpp"

using nlohmann::json;

namespace {

// Mounts an 8 MiB tmpfs on a fresh folder; unmounts it at the end.
struct SmallDisk {
  lft::TempDir dir;
  bool mounted = false;
  SmallDisk() { mounted = mount("tmpfs", dir.path.c_str(), "tmpfs", 0, "size=8m") == 0; }
  ~SmallDisk() {
    if (mounted) umount2(dir.path.c_str(), MNT_DETACH);
  }
};

// Folded text of `n` distinct random stacks: it does not compress in the store.
std::string random_folded(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "main";
    for (int d = 0; d < 6; ++d) out += ";f" + std::to_string(rng());
    out += " 1\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIPPED: the disk-full test mounts a tmpfs and needs root\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

TEST_CASE("disk full: 507 with the reason, DELETE frees space, uploads resume without a restart") {
  SmallDisk disk;
  REQUIRE(disk.mounted);
  {
    lft::ServerProc s(disk.dir.path + "/data",
                      {"--disk-reserve", "1M", "--retention-interval", "1", "--sync", "normal"});
    auto c = s.client();
    std::vector<int64_t> ids;
    int status = 0;
    std::string body;
    for (int i = 0; i < 200 && status != 507; ++i) {
      auto r = c.Post("/api/runs?name=fill", random_folded(2000, static_cast<unsigned>(i)),
                      "text/plain");
      REQUIRE(r);
      status = r->status;
      body = r->body;
      if (status == 201)
        ids.push_back(json::parse(r->body)["id"].get<int64_t>());
      else
        CHECK(status == 507);
    }
    CAPTURE(body);
    REQUIRE(status == 507);
    CHECK(body.find("insufficient storage") != std::string::npos);
    CHECK(body.find("disk is full") != std::string::npos);
    MESSAGE("runs stored before the disk filled: " << ids.size());
    REQUIRE(ids.size() >= 2);
    CHECK(s.log().find("released the 1048576 byte reserve") != std::string::npos);
    // Issue 31: the uploads that follow the first 507 spent the released
    // reserve, and then every DELETE answered 507, also after a restart.
    // Now they are refused before they write, and the reserve stays for deletes.
    for (int i = 0; i < 6; ++i) {
      auto r = c.Post("/api/runs?name=more", random_folded(2000, 5000u + static_cast<unsigned>(i)),
                      "text/plain");
      REQUIRE(r);
      CAPTURE(r->body);
      CHECK(r->status == 507);
      CHECK(r->body.find("reserve for deletes is spent") != std::string::npos);
    }
    CHECK(s.stop() == 0);
  }
  {
    lft::ServerProc s(disk.dir.path + "/data",
                      {"--disk-reserve", "1M", "--retention-interval", "1", "--sync", "normal"});
    auto c = s.client();
    std::vector<int64_t> ids;
    auto list = c.Get("/api/runs?name=fill&limit=200");
    REQUIRE(list);
    CAPTURE(list->body);
    REQUIRE(list->status == 200);
    const json listed = json::parse(list->body);
    for (const auto& r : listed["runs"]) ids.push_back(r["id"].get<int64_t>());
    std::sort(ids.begin(), ids.end());
    REQUIRE(ids.size() >= 2);
    // Reads keep working, deletes work (the reserve made room for SQLite's journal).
    auto one = c.Get(("/api/runs/" + std::to_string(ids.back())).c_str());
    REQUIRE(one);
    CHECK(one->status == 200);
    for (std::size_t i = 0; i < ids.size() / 2; ++i) {
      auto d = c.Delete(("/api/runs/" + std::to_string(ids[i])).c_str());
      REQUIRE(d);
      CAPTURE(d->body);
      CHECK(d->status == 204);
    }
    // Freed pages are reused: an upload fits again, no restart.
    auto again = c.Post("/api/runs?name=after", random_folded(2000, 9999), "text/plain");
    REQUIRE(again);
    CAPTURE(again->body);
    CHECK(again->status == 201);
    lfh::check_healthz_prompt(s);
    CHECK(s.stop() == 0);
  }
}

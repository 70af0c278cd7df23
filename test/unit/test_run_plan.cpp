#include <catch2/catch.hpp>

#include <algorithm>

#include "rt/error.hpp"
#include "run/plan.hpp"

using namespace rt::run;

namespace {

struct Fixture {
  rt::ExecOptions o;
  HostInfo h;
  Fixture() {
    h.uid = 1000;
    h.gid = 100;
    h.home = "/home/alice";
    h.cwd = "/home/alice/work";
  }
  MountPlan plan(bool root_emulation = false, bool apt = false) {
    PlanInputs in;
    in.options = &o;
    in.host = &h;
    in.rootfs = "/img";
    in.root_emulation = root_emulation;
    in.apt = apt;
    return build_plan(in);
  }
};

const Mount* find(const MountPlan& p, const std::string& dst) {
  for (const auto& m : p.mounts)
    if (m.dst == dst) return &m;
  return nullptr;
}

}  // namespace

TEST_CASE("default plan has host dev proc sys tmp etc files and home with ids mapped to themselves") {
  Fixture f;
  auto p = f.plan();
  for (const char* d :
       {"/dev", "/proc", "/sys", "/tmp", "/etc/hosts", "/etc/resolv.conf", "/etc/passwd", "/etc/group", "/home/alice"})
    CHECK(find(p, d) != nullptr);
  CHECK(p.root_mode == RootMode::ReadOnly);
  CHECK(p.inner_uid == 1000);
  CHECK(p.outer_uid == 1000);
  // The working directory is under home: no second mount for it.
  CHECK(find(p, "/home/alice/work") == nullptr);
  CHECK(p.cwd == "/home/alice/work");
  CHECK_FALSE(p.cwd_explicit);
}

TEST_CASE("root maps the caller to 0 and no-home drops home and private-tmp uses a tmpfs") {
  Fixture f;
  f.o.uid = 0;
  f.o.gid = 0;
  f.o.no_home = true;
  f.o.private_tmp = true;
  auto p = f.plan();
  CHECK(p.inner_uid == 0);
  CHECK(p.outer_uid == 1000);
  CHECK(find(p, "/home/alice") == nullptr);
  REQUIRE(find(p, "/tmp"));
  CHECK(find(p, "/tmp")->kind == Mount::Kind::Tmpfs);
  // cwd under the unbound home is not bound either.
  CHECK(find(p, "/home/alice/work") == nullptr);
}

TEST_CASE("image_tmp leaves the image's own /tmp: no bind, no tmpfs (rt build's RUN)") {
  Fixture f;
  REQUIRE(find(f.plan(), "/tmp"));
  f.o.image_tmp = true;
  CHECK(find(f.plan(), "/tmp") == nullptr);
}

TEST_CASE("working directory outside home is bound but system directories never") {
  Fixture f;
  f.h.cwd = "/scratch/run1";
  CHECK(find(f.plan(), "/scratch/run1") != nullptr);
  f.h.cwd = "/var/tmp/job";
  CHECK(find(f.plan(), "/var/tmp/job") != nullptr);
  f.h.cwd = "/usr/share";
  CHECK(find(f.plan(), "/usr/share") == nullptr);
  f.h.cwd = "/tmp/x";  // shown through /tmp already
  CHECK(find(f.plan(), "/tmp/x") == nullptr);
  f.o.private_tmp = true;  // and not brought back under a private /tmp
  CHECK(find(f.plan(), "/tmp/x") == nullptr);
}

TEST_CASE("binds keep their order and options and relative sources are from cwd") {
  Fixture f;
  f.o.binds = {rt::parse_bind("data:/d:ro"), rt::parse_bind("/x"), rt::parse_bind("rel")};
  auto p = f.plan();
  auto* d = find(p, "/d");
  REQUIRE(d);
  CHECK(d->src == "/home/alice/work/data");
  CHECK(d->readonly);
  CHECK(p.mounts.back().dst == "/home/alice/work/rel");
  CHECK(find(p, "/x") != nullptr);
}

TEST_CASE("write and write-tmpfs exclude each other and cd wins") {
  Fixture f;
  f.o.write = true;
  CHECK(f.plan().root_mode == RootMode::Writable);
  f.o.write_tmpfs = true;
  CHECK_THROWS_AS(f.plan(), rt::Error);
  f.o.write = false;
  f.o.cd = "/opt/app";
  auto p = f.plan();
  CHECK(p.root_mode == RootMode::Overlay);
  CHECK(p.cwd == "/opt/app");
  CHECK(p.cwd_explicit);
}

TEST_CASE("overlays: read-only ones stack, one takes the writes, and what excludes them") {
  Fixture f;
  f.o.overlays = {"base:ro", "/abs/env", "more:ro"};
  auto p = f.plan();
  CHECK(p.root_mode == RootMode::Overlay);
  REQUIRE(p.overlays.size() == 3);
  CHECK(p.overlays[0].path == "/home/alice/work/base");  // relative to the working directory
  CHECK_FALSE(p.overlays[0].writable);
  CHECK(p.overlays[1].path == "/abs/env");
  CHECK(p.overlays[1].writable);
  CHECK_THAT(describe(p, false).front(), Catch::Contains("`/abs/env` (writes kept in its upper/)"));
  f.o.overlays = {"a:ro"};
  CHECK_THAT(describe(f.plan(), false).front(), Catch::Contains("writes to a tmpfs (discarded)"));
  f.o.overlays = {"a", "b"};
  CHECK_THROWS_WITH(f.plan(), Catch::Contains("only one overlay takes the writes"));
  f.o.overlays = {"a"};
  f.o.write_tmpfs = true;
  CHECK_THROWS_WITH(f.plan(), Catch::Contains("exclude each other"));
  f.o.write_tmpfs = false;
  f.o.write = true;
  CHECK_THROWS_WITH(f.plan(), Catch::Contains("exclude each other"));
  f.o.overlays = {"a:ro"};
  CHECK_THROWS_WITH(f.plan(), Catch::Contains("--write and --overlay exclude each other"));
}

TEST_CASE("describe prints every mount") {
  Fixture f;
  auto p = f.plan();
  auto lines = describe(p);
  CHECK(lines.size() == p.mounts.size() + 3);
  CHECK(std::any_of(lines.begin(), lines.end(),
                    [](const std::string& l) { return l.find("uid map: 1000 -> 1000") != std::string::npos; }));
}

TEST_CASE("root emulation keeps the image's own passwd and group, and tells apt to stay root") {
  Fixture f;
  auto normal = f.plan();
  REQUIRE(find(normal, "/etc/passwd"));
  CHECK_FALSE(find(normal, "/etc/apt/apt.conf.d/00rt-root-emulation"));
  auto emulated = f.plan(true, true);
  CHECK_FALSE(find(emulated, "/etc/passwd"));
  CHECK_FALSE(find(emulated, "/etc/group"));
  const Mount* apt = find(emulated, "/etc/apt/apt.conf.d/00rt-root-emulation");
  REQUIRE(apt);
  CHECK(apt->kind == Mount::Kind::Staged);
  REQUIRE(emulated.staged.size() == 1);
  CHECK(emulated.staged[0].content == "APT::Sandbox::User \"root\";\n");
  CHECK_FALSE(find(f.plan(true, false), "/etc/apt/apt.conf.d/00rt-root-emulation"));  // no apt in the image
}

TEST_CASE("host files are one tree: a bind per distinct host directory, a relative link per file") {
  std::vector<Mount> m = {
      {.kind = Mount::Kind::HostFile,
       .src = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.0",
       .dst = "/run/rt-host/lib/libibverbs.so.1",
       .readonly = true,
       .why = "host"},
      {.kind = Mount::Kind::Bind, .src = "/etc/libibverbs.d", .dst = "/etc/libibverbs.d", .readonly = true},
      {.kind = Mount::Kind::HostFile, .src = "/opt/nl/libnl-3.so.200.26.0", .dst = "/run/rt-host/lib/libnl-3.so.200"},
      {.kind = Mount::Kind::HostFile,
       .src = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.0",
       .dst = "/run/rt-host/lib/libmlx5.so.1"},
      {.kind = Mount::Kind::HostFile, .src = "/usr/bin/ibv_devinfo", .dst = "/run/rt-host/bin/ibv_devinfo"},
      // Inside a directory bound already: reached through it.
      {.kind = Mount::Kind::HostFile,
       .src = "/usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0.0.0",
       .dst = "/run/rt-host/lib/libuct_ib.so.0"},
  };
  const HostFilesTree t = host_files_tree(m);
  CHECK(t.dirs == std::vector<std::string>{"/usr/lib/x86_64-linux-gnu", "/opt/nl", "/usr/bin"});
  CHECK(t.subdirs == std::vector<std::string>{"lib", "bin"});
  REQUIRE(t.links.size() == 5);
  CHECK(t.links[0].path == "lib/libibverbs.so.1");
  CHECK(t.links[0].target == "../.d/0/libibverbs.so.1.14.0");
  CHECK(t.links[1].target == "../.d/1/libnl-3.so.200.26.0");
  CHECK(t.links[1].dir == 1);
  CHECK(t.links[2].target == "../.d/0/libmlx5.so.1.24.0");
  CHECK(t.links[3].path == "bin/ibv_devinfo");
  CHECK(t.links[3].target == "../.d/2/ibv_devinfo");
  CHECK(t.links[4].target == "../.d/0/ucx/libuct_ib.so.0.0.0");
  CHECK(t.links[4].dir == 0);
  // Nested the other way round (the inner directory first), and below "/".
  auto two = host_files_tree({{.kind = Mount::Kind::HostFile, .src = "/a/b/lib1.so", .dst = "/run/rt-host/lib/1"},
                              {.kind = Mount::Kind::HostFile, .src = "/a/lib2.so", .dst = "/run/rt-host/lib/2"},
                              {.kind = Mount::Kind::HostFile, .src = "/x/lib3.so", .dst = "/run/rt-host/lib/3"}});
  CHECK(two.dirs == std::vector<std::string>{"/a", "/x"});
  CHECK(two.links[0].target == "../.d/0/b/lib1.so");
  auto top = host_files_tree({{.kind = Mount::Kind::HostFile, .src = "/lib1.so", .dst = "/run/rt-host/lib/1"},
                              {.kind = Mount::Kind::HostFile, .src = "/a/lib2.so", .dst = "/run/rt-host/a/b/2"}});
  CHECK(top.dirs == std::vector<std::string>{"/"});
  CHECK(top.subdirs == std::vector<std::string>{"lib", "a", "a/b"});
  CHECK(top.links[0].target == "../.d/0/lib1.so");
  CHECK(top.links[1].target == "../../.d/0/a/lib2.so");
  // Two files for one name: the last wins, as the later of two binds did.
  auto twice = host_files_tree({{.kind = Mount::Kind::HostFile, .src = "/a/x", .dst = "/run/rt-host/bin/x"},
                                {.kind = Mount::Kind::HostFile, .src = "/b/x", .dst = "/run/rt-host/bin/x"}});
  REQUIRE(twice.links.size() == 1);
  CHECK(twice.links[0].target == "../.d/1/x");
  CHECK(host_files_tree({}).links.empty());
  // A place outside the tree, or in its hidden mount points, is refused.
  for (const char* dst : {"/usr/lib/libx.so.1", "/run/rt-host", "/run/rt-host/.d/0", "/run/rt-host/lib/../../etc/x"})
    CHECK_THROWS_AS(host_files_tree({{.kind = Mount::Kind::HostFile, .src = "/lib/libx.so.1", .dst = dst}}), rt::Error);
  CHECK_THROWS_AS(host_files_tree({{.kind = Mount::Kind::HostFile, .src = "libx.so.1", .dst = "/run/rt-host/lib/x"}}),
                  rt::Error);
}

TEST_CASE("describe shows the host files as one line, and each link and bind when asked") {
  Fixture f;
  f.o.binds = {rt::parse_bind("/data")};
  PlanInputs in;
  in.options = &f.o;
  in.host = &f.h;
  in.rootfs = "/img";
  in.injected = {
      {.kind = Mount::Kind::HostFile, .src = "/h/a/liba.so.1.0", .dst = "/run/rt-host/lib/liba.so.1", .why = "host"},
      {.kind = Mount::Kind::HostFile, .src = "/h/b/libb.so.2", .dst = "/run/rt-host/lib/libb.so.2", .why = "host"},
      {.kind = Mount::Kind::HostFile, .src = "/h/a/libc2.so.3", .dst = "/run/rt-host/lib/libc2.so.3", .why = "host"},
  };
  const MountPlan p = build_plan(in);
  // Injected mounts come before --bind's, in order.
  REQUIRE(p.mounts.size() >= 4);
  CHECK(p.mounts.back().dst == "/data");
  CHECK(p.mounts[p.mounts.size() - 4].dst == "/run/rt-host/lib/liba.so.1");
  auto count = [](const std::vector<std::string>& lines, const std::string& part) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  const auto brief = describe(p, false);
  CHECK(brief.size() == p.mounts.size() - 3 + 1 + 3);
  CHECK(count(brief, "host files: 3 links into `/run/rt-host` from 2 directories") == 1);
  CHECK(count(brief, "liba") == 0);
  const auto full = describe(p, true);
  CHECK(full.size() == brief.size() + 2 + 3);
  CHECK(count(full, "mount bind `/h/b` on `/run/rt-host/.d/1` ro") == 1);
  CHECK(count(full, "link `/run/rt-host/lib/libc2.so.3` -> `../.d/0/libc2.so.3`") == 1);
}

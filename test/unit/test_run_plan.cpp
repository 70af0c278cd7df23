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

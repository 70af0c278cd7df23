// Instances: names, and the record the store keeps of each.
#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "run/instance.hpp"
#include "temp_dir.hpp"

using namespace rt;

TEST_CASE("instance names are checked") {
  for (const char* good : {"web", "a", "jupyter-1", "db_2.test", "9lives"}) CHECK_NOTHROW(check_instance_name(good));
  for (const char* bad : {"", "-x", ".hidden", "a/b", "..", "sp ace", "semi;colon", "new\nline"})
    CHECK_THROWS_AS(check_instance_name(bad), Error);
  CHECK_NOTHROW(check_instance_name(std::string(64, 'a')));
  CHECK_THROWS_AS(check_instance_name(std::string(65, 'a')), Error);
}

TEST_CASE("an instance's record is written and read back; without its holder it is not running") {
  TempDir t;
  auto store = store::Root::open(t.path + "/store", true);
  REQUIRE(store);
  run::InstanceRecord r;
  r.info.name = "svc";
  r.info.image = "/images/app.sif";
  r.info.command = {"/.singularity.d/startscript", "a b"};
  r.info.started = "2026-11-24T09:00:00Z";
  r.info.pid = 4242;
  r.uid = 0;
  r.gid = 0;
  r.mntns = "mnt:[4026532000]";
  run::write_instance(*store, r);
  const run::InstanceRecord back = run::read_instance(*store, "svc");
  CHECK(back.info.image == r.info.image);
  CHECK(back.info.command == r.info.command);
  CHECK(back.info.started == r.info.started);
  CHECK(back.info.pid == 4242);
  CHECK(back.mntns == r.mntns);
  CHECK(back.info.logs == store->path() + "/instances/svc");
  CHECK_FALSE(back.info.running);
  CHECK_THROWS_WITH(run::read_instance(*store, "other"), Catch::Contains("no instance `other`"));
}

#include <catch2/catch.hpp>

#include "run/passwd.hpp"

using namespace rt::run;

TEST_CASE("the caller replaces clashing passwd entries and is appended") {
  Identity id{1000, 100, "alice", "users", "/home/alice", "/bin/sh"};
  std::string img =
      "root:x:0:0:root:/root:/bin/sh\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\nalice:x:5:5::/:/bin/false\n";
  std::string out = synth_passwd(img, id);
  CHECK(out == "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:100:alice:/home/alice:/bin/sh\n");
}

TEST_CASE("group gets the group of the caller and an empty image file works") {
  Identity id{1000, 100, "alice", "users", "/home/alice", ""};
  CHECK(synth_group("root:x:0:\nusers:x:99:\n", id) == "root:x:0:\nusers:x:100:\n");
  CHECK(synth_passwd("", id) == "alice:x:1000:100:alice:/home/alice:/bin/sh\n");
}

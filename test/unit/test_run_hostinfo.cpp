#include <catch2/catch.hpp>

#include "run/hostinfo.hpp"

using rt::run::find_id_line;

TEST_CASE("find_id_line finds the entry by numeric id") {
  std::string text = "root:x:0:0:root:/root:/bin/bash\n#c\nalice:x:1000:100::/home/alice:/bin/zsh\n";
  auto f = find_id_line(text, 1000);
  REQUIRE(f.size() == 7);
  CHECK(f[0] == "alice");
  CHECK(f[5] == "/home/alice");
  CHECK(find_id_line(text, 5).empty());
}

TEST_CASE("gather_host_info reports the caller") {
  auto h = rt::run::gather_host_info();
  CHECK(h.uid == ::getuid());
  CHECK_FALSE(h.user.empty());
  CHECK_FALSE(h.env.empty());
}

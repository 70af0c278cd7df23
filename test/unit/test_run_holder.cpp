// run/holder: socket names nobody without the user's secret can compute.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "run/holder.hpp"

using rt::run::HolderKey;

TEST_CASE("holder names are keyed with the secret and say nothing of the next one") {
  const std::string a(64, 'a'), b(64, 'b');
  HolderKey k{"rt-sqfs", a, "/images/x.sqfs"};
  CHECK(k.name(0).rfind("rt-sqfs-", 0) == 0);
  CHECK(k.name(0).size() == 8 + 32);
  CHECK(k.name(0) == HolderKey{"rt-sqfs", a, "/images/x.sqfs"}.name(0));  // every rank agrees
  CHECK(k.name(0) != HolderKey{"rt-sqfs", b, "/images/x.sqfs"}.name(0));  // another user's differ
  CHECK(k.name(0) != HolderKey{"rt-sqfs", a, "/images/y.sqfs"}.name(0));
  std::set<std::string> names;
  for (int i = 0; i < 8; ++i) names.insert(k.name(i));
  CHECK(names.size() == 8);
  // The proof is keyed too, and differs from the name it is for.
  CHECK(k.proof(k.name(0)) != k.name(0).substr(8));
  CHECK(k.proof(k.name(0)) != HolderKey{"rt-sqfs", b, "/images/x.sqfs"}.proof(k.name(0)));
}

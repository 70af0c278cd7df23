// The progress line: bytes, share of the total, rate and time left.
#include <catch2/catch.hpp>

#include "util/progress.hpp"

using rt::util::Meter;

TEST_CASE("a progress line shows bytes, share, rate and time left", "[util][progress]") {
  CHECK(Meter::line(12'000'000, 40'000'000, 1.5) == "12.0 MB / 40.0 MB (30%), 8.0 MB/s, 0:04 left");
  // Too early for a rate.
  CHECK(Meter::line(1000, 40'000'000, 0.1) == "1.0 kB / 40.0 MB (0%)");
  // No total: no share and no time left.
  CHECK(Meter::line(12'000'000, 0, 2) == "12.0 MB, 6.0 MB/s");
  // Past an estimated total (an archive's size): 100%, nothing left.
  CHECK(Meter::line(50'000'000, 40'000'000, 5) == "50.0 MB / 40.0 MB (100%), 10.0 MB/s");
  // Hours.
  CHECK(Meter::line(1'000'000, 8'001'000'000, 1) == "1.0 MB / 8.00 GB (0%), 1.0 MB/s, 2:13:20 left");
}

TEST_CASE("progress shows nothing at -q", "[util][progress]") {
  CHECK(Meter::mode_for(-1) == Meter::Mode::Off);
  Meter m("quiet", 10, Meter::mode_for(-1));
  m.add(5);
  m.follow([] { return uint64_t{7}; });  // not started when off
  m.done();
  CHECK_FALSE(m.shown());
}

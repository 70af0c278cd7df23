#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "squash/pusher.hpp"

using rt::squash::Pusher;
using Ino = Pusher::Ino;
using Files = std::vector<std::pair<Ino, uint64_t>>;

namespace {

// A directory `dir` of `n` regular files of `size` bytes, inodes from `first`.
Files files(Ino first, size_t n, uint64_t size) {
  Files out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(first + i, size);
  return out;
}

std::vector<Ino> range(Ino from, Ino to) {  // [from, to]
  std::vector<Ino> out;
  for (Ino i = from; i <= to; ++i) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("pusher: nothing is pushed before the session has started") {
  Pusher p([](Ino) {}, 0);
  CHECK(p.listed(1, 0, 3, files(100, 3, 4096)).empty());
  CHECK(p.first_read(100).empty());
}

TEST_CASE("pusher: a listing alone pushes nothing, a read pushes the next small files of the directory") {
  Pusher p([](Ino) {}, 0);
  p.start();
  CHECK(p.listed(1, 0, 100, files(100, 100, 4096)).empty());
  CHECK(p.listed(1, 100, 100, {}).empty());  // the end of the listing: no walk yet
  // 128 KiB of 4 KiB files after the one read.
  CHECK(p.first_read(100) == range(101, 132));
  CHECK(p.queued() == 0);
  CHECK(p.first_read(999).empty());  // never listed: a program's own file
}

TEST_CASE("pusher: reading in listing order queues a window, reading backwards does not") {
  Pusher p([](Ino) {}, 0);
  p.start();
  p.listed(1, 0, 100, files(100, 100, 4096));
  p.first_read(100);
  // The reader found 101..132 in the cache and asks for the first one not pushed.
  CHECK(p.first_read(133) == range(134, 165));
  CHECK(p.queued() == 34);  // 166..199
  CHECK(p.first_read(105).empty());
  CHECK(p.queued() == 34);
}

TEST_CASE("pusher: in a walk, the next directory's first files come once its listing is taken") {
  Pusher p([](Ino) {}, 0);
  p.start();
  p.listed(1, 0, 200, files(100, 200, 4096));
  p.first_read(100);  // pushes 101..132
  p.first_read(133);  // in order: a walk (1)
  p.first_read(166);  // (2)
  p.first_read(200);  // (3)
  // The kernel makes the new directory's inodes only as the lister takes
  // the first answer: its files go with the lister's next request.
  CHECK(p.listed(2, 0, 5, files(1000, 5, 100)).empty());
  CHECK(p.listed(2, 5, 5, {}) == range(1000, 1004));
  CHECK(p.listed(2, 5, 5, {}).empty());  // listed again: already pushed
}

TEST_CASE("pusher: a read out of order ends the walk") {
  Pusher p([](Ino) {}, 0);
  p.start();
  p.listed(1, 0, 200, files(100, 200, 4096));
  p.first_read(100);
  p.first_read(133);
  p.first_read(166);
  p.first_read(200);
  p.first_read(120);  // backwards
  p.listed(2, 0, 5, files(1000, 5, 100));
  CHECK(p.listed(2, 5, 5, {}).empty());
}

TEST_CASE("pusher: workers push what is queued") {
  std::mutex mu;
  std::vector<Ino> pushed;
  {
    Pusher p(
        [&](Ino i) {
          std::lock_guard<std::mutex> g(mu);
          pushed.push_back(i);
        },
        2);
    p.start();
    p.listed(1, 0, 100, files(100, 100, 4096));
    p.push_now(p.first_read(100));
    p.push_now(p.first_read(133));
    for (int i = 0; i < 500 && p.queued() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }  // joins the workers
  std::sort(pushed.begin(), pushed.end());
  auto want = range(101, 132);  // 133 was read, not pushed
  for (Ino i : range(134, 199)) want.push_back(i);
  CHECK(pushed == want);
}

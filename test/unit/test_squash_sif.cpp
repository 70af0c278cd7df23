// SIF files: the header and descriptor table, from bytes laid out as the
// published format has them.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "rt/error.hpp"
#include "squash/sif.hpp"

using namespace rt::squash;

namespace {

constexpr size_t kDescriptor = 585, kTableAt = 4096, kSlots = 4;

template <class T>
void put(std::string& b, size_t at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) b[at + i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}

// A SIF file of `size` bytes with room for kSlots descriptors.
std::string sif_bytes(size_t size = 65536) {
  std::string b(size, '\0');
  std::memcpy(b.data() + 32,
              "SIF_MAGIC\0"
              "01\0"
              "02\0",
              16);
  put<int64_t>(b, 88, kSlots);
  put<int64_t>(b, 96, kTableAt);
  put<int64_t>(b, 104, kSlots * kDescriptor);
  return b;
}

void describe(std::string& b, size_t slot, int32_t type, uint32_t id, int64_t offset, int64_t size,
              const std::string& extra = "") {
  const size_t d = kTableAt + slot * kDescriptor;
  put<int32_t>(b, d, type);
  b[d + 4] = 1;  // used
  put<uint32_t>(b, d + 5, id);
  put<uint32_t>(b, d + 9, 0xf0000001u);
  put<int64_t>(b, d + 17, offset);
  put<int64_t>(b, d + 25, size);
  std::memcpy(b.data() + d + 4 + 1 + 12 + 56 + 128, extra.data(), extra.size());
}

std::string partition(int32_t fs, int32_t part) {
  std::string e(11, '\0');
  put<int32_t>(e, 0, fs);
  put<int32_t>(e, 4, part);
  std::memcpy(e.data() + 8, "02", 2);
  return e;
}

SifFile parse(const std::string& bytes) {
  int fd = ::memfd_create("t.sif", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } c{fd};
  CHECK(is_sif(fd));
  return read_sif(fd, "t.sif");
}

}  // namespace

TEST_CASE("a SIF file's primary partition and signature are read", "[squash][sif]") {
  std::string b = sif_bytes();
  describe(b, 0, 0x4004, 1, 32768, 4096, partition(1, 2));
  std::string sig(4 + 20, '\0');
  put<int32_t>(sig, 0, 1);
  for (int i = 0; i < 20; ++i) sig[4 + i] = static_cast<char>(0xa0 + i);
  describe(b, 2, 0x4005, 2, 40960, 100, sig);  // slot 1 stays unused
  SifFile f = parse(b);
  REQUIRE(f.objects.size() == 2);
  REQUIRE(f.primary());
  CHECK(f.primary()->offset == 32768);
  CHECK(f.primary()->size == 4096);
  CHECK(f.primary()->arch == "02");
  CHECK(f.signatures() == 1);
  CHECK(f.objects[1].entity == "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
  CHECK(sif_root_partition(f, "t.sif").id == 1);
  CHECK(sif_arch_name(f.arch) == "amd64");
  // A fingerprint that ends in zero bytes keeps them.
  sig[4 + 18] = sig[4 + 19] = '\0';
  describe(b, 2, 0x4005, 2, 40960, 100, sig);
  CHECK(parse(b).objects[1].entity == "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b10000");
}

TEST_CASE("SIF partitions rt cannot serve are refused by name", "[squash][sif]") {
  auto refusal = [](int32_t fs, int32_t part, int32_t overlay_fs) {
    std::string b = sif_bytes();
    describe(b, 0, 0x4004, 1, 32768, 4096, partition(fs, part));
    if (overlay_fs) describe(b, 1, 0x4004, 2, 40960, 4096, partition(overlay_fs, 4));
    try {
      sif_root_partition(parse(b), "t.sif");
    } catch (const rt::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal(1, 2, 0) == "accepted");
  CHECK_THAT(refusal(5, 2, 0), Catch::Contains("encrypted SquashFS partition"));
  CHECK_THAT(refusal(2, 2, 0), Catch::Contains("partition is ext3, not SquashFS"));
  CHECK(refusal(1, 2, 2) == "accepted");  // an ext3 overlay: served over the image
  CHECK_THAT(refusal(1, 2, 1), Catch::Contains("overlay partition rt cannot serve (SquashFS, object 2"));
  CHECK_THAT(refusal(1, 3, 0), Catch::Contains("no primary system partition (it holds partition)"));
}

TEST_CASE("SIF offsets and sizes are checked against the file", "[squash][sif]") {
  auto error = [](const std::string& b) {
    try {
      parse(b);
    } catch (const rt::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  std::string b = sif_bytes();
  describe(b, 0, 0x4004, 1, 32768, 65536 - 32768 + 1, partition(1, 2));  // one byte past the end
  CHECK_THAT(error(b), Catch::Contains("SIF object 1 (partition, 32769 bytes at byte 32768) lies outside the file"));
  b = sif_bytes();
  describe(b, 0, 0x4004, 1, -1, 10, partition(1, 2));
  CHECK_THAT(error(b), Catch::Contains("lies outside the file"));
  b = sif_bytes();
  put<int64_t>(b, 96, 65536 - 100);  // the table runs past the end
  CHECK_THAT(error(b), Catch::Contains("the SIF descriptor table (4 descriptors at byte 65436) lies past the end"));
  b = sif_bytes();
  put<int64_t>(b, 88, 0);
  CHECK_THAT(error(b), Catch::Contains("descriptor table is corrupt (0 descriptors)"));
  CHECK_THAT(error(sif_bytes().substr(0, 100)), Catch::Contains("the SIF header lies past the end of the file"));
}

TEST_CASE("sif_prefix writes what read_sif reads back: one primary SquashFS partition", "[squash][sif]") {
  const std::string id = "0123456789abcdef";
  std::string b = sif_prefix(8192, id, 1700000000);
  REQUIRE(b.size() == kSifDataStart);
  CHECK(b.compare(0, 31, "#!/usr/bin/env run-singularity\n") == 0);
  b.append(8192, 'x');  // the image's bytes
  const SifFile f = parse(b);
  REQUIRE(f.objects.size() == 1);
  REQUIRE(f.primary());
  CHECK(f.primary()->offset == kSifDataStart);
  CHECK(f.primary()->size == 8192);
  CHECK(f.primary()->fs == static_cast<int32_t>(SifFs::Squash));
  CHECK(f.id == "30313233343536373839616263646566");
  CHECK(f.created == 1700000000);
  CHECK(f.arch == f.primary()->arch);
  CHECK(sif_root_partition(f, "t.sif").id == 1);
  // The image must be all there: a short file is refused.
  b.resize(kSifDataStart + 100);
  int fd = ::memfd_create("short.sif", MFD_CLOEXEC);
  REQUIRE(::write(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size()));
  CHECK_THROWS_AS(read_sif(fd, "short.sif"), rt::Error);
  ::close(fd);
}

TEST_CASE("sif_prefix puts data objects before the partition, which starts on a page", "[squash][sif]") {
  const std::string def = "Bootstrap: docker\nFrom: x\n", labels = "{\"a\": \"b\"}\n";
  std::string b = sif_prefix(4096, "0123456789abcdef", 1700000000,
                             {{SifData::Deffile, "", def}, {SifData::Labels, "labels", labels}});
  REQUIRE(b.size() == kSifDataStart + 4096);  // the objects' bytes, padded to a page
  b.append(4096, 'x');
  const SifFile f = parse(b);
  REQUIRE(f.objects.size() == 3);
  CHECK(f.objects[0].type == static_cast<int32_t>(SifData::Deffile));
  CHECK(f.objects[0].id == 1);
  CHECK(f.objects[0].offset == kSifDataStart);
  CHECK(b.substr(f.objects[0].offset, f.objects[0].size) == def);
  CHECK(f.objects[1].type == static_cast<int32_t>(SifData::Labels));
  CHECK(f.objects[1].name == "labels");
  CHECK(b.substr(f.objects[1].offset, f.objects[1].size) == labels);
  REQUIRE(f.primary());
  CHECK(f.primary()->id == 3);
  CHECK(f.primary()->offset == kSifDataStart + 4096);
  CHECK(f.primary()->size == 4096);
  CHECK(sif_root_partition(f, "t.sif").id == 3);
}

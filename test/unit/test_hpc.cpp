#include <catch2/catch.hpp>

#include <fcntl.h>
#include <gnu/libc-version.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>

#include "hpc/elf.hpp"
#include "hpc/elf_cache.hpp"
#include "hpc/inject.hpp"
#include "hpc/launcher.hpp"
#include "hpc/ldcache.hpp"
#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "util/fd.hpp"

using namespace rt::hpc;

namespace {
Launcher detect(const std::map<std::string, std::string>& env) {
  return detect_launcher([&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST_CASE("slurm task counts per node are read from the compressed form") {
  CHECK(slurm_tasks_on_node("4", 0) == 4);
  CHECK(slurm_tasks_on_node("2(x3),1", 0) == 2);
  CHECK(slurm_tasks_on_node("2(x3),1", 2) == 2);
  CHECK(slurm_tasks_on_node("2(x3),1", 3) == 1);
  CHECK(slurm_tasks_on_node("2(x3),1", 4) == 0);
  CHECK(slurm_tasks_on_node("x(", 0) == 0);
}

TEST_CASE("launchers are told apart by their variables") {
  auto none = detect({});
  CHECK(none.kind == Launcher::Kind::None);
  auto slurm = detect({{"SLURM_JOB_ID", "7"},
                       {"SLURM_STEP_ID", "0"},
                       {"SLURM_PROCID", "1"},
                       {"SLURM_STEP_TASKS_PER_NODE", "3(x2)"},
                       {"SLURM_NODEID", "1"},
                       {"SLURM_LOCALID", "1"},
                       {"PMIX_SERVER_TMPDIR", "/var/spool/slurmd/pmix.7.0"},
                       {"PMIX_SYSTEM_TMPDIR", "relative"}});
  CHECK(slurm.kind == Launcher::Kind::Slurm);
  CHECK(slurm.job == "7.0");
  CHECK(slurm.local_size == 3);
  CHECK(slurm.local_rank == 1);
  REQUIRE(slurm.paths.size() == 1);  // relative paths are ignored
  CHECK(slurm.paths[0] == "/var/spool/slurmd/pmix.7.0");
  // mpirun inside an allocation: Open MPI's variables win over Slurm's.
  auto ompi = detect({{"SLURM_JOB_ID", "7"},
                      {"SLURM_STEP_ID", "0"},
                      {"SLURM_PROCID", "0"},
                      {"OMPI_COMM_WORLD_RANK", "3"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "16"},
                      {"OMPI_MCA_ess_base_jobid", "123"}});
  CHECK(ompi.kind == Launcher::Kind::OpenMpi);
  CHECK(ompi.local_size == 16);
  CHECK(ompi.job == "123");
  auto hydra = detect({{"PMI_RANK", "0"}, {"PMI_FD", "5"}, {"MPI_LOCALNRANKS", "2"}});
  CHECK(hydra.kind == Launcher::Kind::Hydra);
  CHECK(hydra.local_size == 2);
  CHECK(detect({{"PMIX_RANK", "0"}, {"PMIX_NAMESPACE", "ns"}}).kind == Launcher::Kind::Pmix);
}

TEST_CASE("the site configuration is parsed and typos are refused") {
  auto c = parse_site_config("# site\nopenmpi.library = /opt/ompi/lib/libmpi.so.40\n\ngpu.binaries = a  b\n", "f");
  CHECK(c.get("openmpi.library") == std::vector<std::string>{"/opt/ompi/lib/libmpi.so.40"});
  CHECK(c.get("gpu.binaries") == std::vector<std::string>{"a", "b"});
  CHECK(c.get("ib.paths", {"x"}) == std::vector<std::string>{"x"});
  CHECK_THROWS_WITH(parse_site_config("openmpi.libary = x\n", "f"), Catch::Contains("line 1: unknown key"));
  CHECK_THROWS_WITH(parse_site_config("ok\n", "f"), Catch::Contains("expected `key = value`"));
}

TEST_CASE("glibc versions compare by number") {
  CHECK(compare_glibc("GLIBC_2.34", "GLIBC_2.4") > 0);
  CHECK(compare_glibc("GLIBC_2.2.5", "GLIBC_2.3") < 0);
  CHECK(compare_glibc("GLIBC_2.17", "GLIBC_2.17") == 0);
  CHECK(compare_glibc("", "GLIBC_2.2.5") < 0);
}

TEST_CASE("MPI ABIs are known by soname") {
  CHECK(mpi_abi("libmpi.so.40") == "openmpi");
  CHECK(mpi_abi("libmpi.so.40.30.4") == "openmpi");
  CHECK(mpi_abi("libmpi.so.12") == "mpich");
  CHECK(mpi_abi("libmpich.so.12.2.2") == "mpich");
  CHECK(mpi_abi("libmpi_cxx.so.40").empty());
  CHECK(mpi_abi("libmpi.so.20").empty());
}

TEST_CASE("the host's libc and loader cache read as the dynamic linker sees them") {
  auto cache = read_ld_cache("/etc/ld.so.cache");
  REQUIRE(cache.count("libc.so.6"));
  auto libc = read_elf(cache["libc.so.6"]);
  REQUIRE(libc);
  CHECK(libc->soname == "libc.so.6");
  CHECK(compare_glibc(libc->glibc_defined, "GLIBC_2.17") > 0);  // Debian 12: 2.36
  REQUIRE(cache.count("libz.so.1"));
  auto z = read_elf(cache["libz.so.1"]);
  REQUIRE(z);
  CHECK(z->soname == "libz.so.1");
  CHECK(std::find(z->needed.begin(), z->needed.end(), "libc.so.6") != z->needed.end());
  CHECK(!z->glibc_needed.empty());
  CHECK_FALSE(read_elf("/etc/hostname").has_value());  // not ELF
  CHECK_THROWS_AS(read_ld_cache("/etc/hostname"), rt::Error);
}

TEST_CASE("the ELF cache answers as read_elf does and notices changed files") {
  char dir_template[] = "/tmp/rt-elfcache.XXXXXX";
  REQUIRE(::mkdtemp(dir_template));
  const std::string dir = dir_template, lib = dir + "/libz.so.1";
  rt::util::UniqueFd dirfd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto cache = read_ld_cache("/etc/ld.so.cache");
  REQUIRE(cache.count("libz.so.1"));
  REQUIRE(std::system(("cp " + cache["libz.so.1"] + " " + lib).c_str()) == 0);
  {
    ElfCache c(dirfd.get(), "cache");
    auto a = c.get(lib);
    REQUIRE(a);
    CHECK(a->soname == "libz.so.1");
    CHECK_FALSE(c.get("/etc/hostname").has_value());
    c.set_note("glibc 1:2:3:4", "GLIBC_2.36");
    c.save();
  }
  {
    ElfCache c(dirfd.get(), "cache");  // from the file
    auto b = c.get(lib);
    REQUIRE(b);
    CHECK(b->soname == "libz.so.1");
    CHECK(b->needed == read_elf(lib)->needed);
    CHECK(b->glibc_needed == read_elf(lib)->glibc_needed);
    CHECK(c.note("glibc 1:2:3:4") == std::optional<std::string>("GLIBC_2.36"));
    CHECK_FALSE(c.note("glibc 9:9:9:9").has_value());
  }
  // The file changes (here: no longer ELF): the cache reads it again.
  REQUIRE(std::system(("cp /etc/hostname " + lib).c_str()) == 0);
  {
    ElfCache c(dirfd.get(), "cache");
    CHECK_FALSE(c.get(lib).has_value());
  }
  // Past its bound (every image version adds notes), a save keeps only
  // what that process used.
  {
    ElfCache c(dirfd.get(), "cache");
    for (size_t i = 0; i <= ElfCache::kMaxEntries; ++i) c.set_note("image " + std::to_string(i), "x");
    c.save();  // all set here: all kept
  }
  {
    ElfCache c(dirfd.get(), "cache");
    CHECK(c.note("image 7") == std::optional<std::string>("x"));
    c.set_note("image new", "y");
    c.save();
  }
  {
    ElfCache c(dirfd.get(), "cache");
    CHECK(c.note("image 7") == std::optional<std::string>("x"));
    CHECK(c.note("image new") == std::optional<std::string>("y"));
    CHECK_FALSE(c.note("image 8").has_value());
  }
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("NVIDIA_VISIBLE_DEVICES becomes CUDA_VISIBLE_DEVICES, indices as the driver's UUIDs") {
  char dir_template[] = "/tmp/rt-gpus.XXXXXX";
  REQUIRE(::mkdtemp(dir_template));
  const std::string dir = dir_template;
  // Two GPUs, listed by PCI bus id as /proc/driver/nvidia/gpus does; the
  // directory order must not matter.
  for (auto [bus, uuid] : {std::pair{"0000:3b:00.0", "GPU-bbbb"}, std::pair{"0000:1a:00.0", "GPU-aaaa"}}) {
    REQUIRE(std::system(("mkdir -p " + dir + "/" + bus).c_str()) == 0);
    std::string info = std::string("Model: \t\t Tesla\nGPU UUID: \t\t ") + uuid + "\nDevice Minor: \t 0\n";
    REQUIRE(std::system(("printf '" + info + "' > " + dir + "/" + bus + "/information").c_str()) == 0);
  }
  CHECK(cuda_visible_devices("1", host_gpus(dir)) == std::optional<std::string>("GPU-bbbb"));
  CHECK(cuda_visible_devices("0,1", host_gpus(dir)) == std::optional<std::string>("GPU-aaaa,GPU-bbbb"));
  CHECK(cuda_visible_devices("GPU-x,MIG-y", host_gpus(dir)) == std::optional<std::string>("GPU-x,MIG-y"));
  CHECK(cuda_visible_devices("7", host_gpus(dir)) == std::optional<std::string>("7"));  // unknown: as it is
  CHECK(cuda_visible_devices("1", host_gpus(dir + "/missing")) == std::optional<std::string>("1"));
  CHECK_FALSE(cuda_visible_devices("all", host_gpus(dir)).has_value());
  CHECK_FALSE(cuda_visible_devices("", host_gpus(dir)).has_value());
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("GPUs left out of NVIDIA_VISIBLE_DEVICES: their nodes by minor number, their bus directories") {
  char dir_template[] = "/tmp/rt-gpus.XXXXXX";
  REQUIRE(::mkdtemp(dir_template));
  const std::string dir = dir_template, gpus = dir + "/gpus", dev = dir + "/dev";
  // Bus order and minor numbers differ: GPU 0 (bus 1a) is /dev/nvidia1.
  for (auto [bus, uuid, minor] :
       {std::tuple{"0000:3b:00.0", "GPU-bbbb", "0"}, std::tuple{"0000:1a:00.0", "GPU-aaaa", "1"}}) {
    REQUIRE(std::system(("mkdir -p " + gpus + "/" + bus + " " + dev).c_str()) == 0);
    std::string info = std::string("GPU UUID: \t ") + uuid + "\nDevice Minor: \t " + minor + "\n";
    REQUIRE(std::system(("printf '" + info + "' > " + gpus + "/" + bus + "/information").c_str()) == 0);
    REQUIRE(std::system(("touch " + dev + "/nvidia" + minor).c_str()) == 0);
  }
  auto hosts = host_gpus(gpus);
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0].bus == "0000:1a:00.0");
  CHECK(hosts[0].uuid == "GPU-aaaa");
  CHECK(hosts[0].minor == 1);
  using V = std::vector<std::string>;
  auto m = gpu_mask("0", host_gpus(gpus), dev);
  CHECK(m.nodes == V{"nvidia0"});
  CHECK(m.buses == V{"0000:3b:00.0"});
  m = gpu_mask("GPU-bbbb", host_gpus(gpus), dev);
  CHECK(m.nodes == V{"nvidia1"});
  CHECK(gpu_mask("0,GPU-bbbb", host_gpus(gpus), dev).nodes.empty());
  CHECK(gpu_mask("none", host_gpus(gpus), dev).nodes == V{"nvidia1", "nvidia0"});
  CHECK(gpu_mask("9", host_gpus(gpus), dev).buses.size() == 2);  // an unknown GPU selects none
  for (const char* all : {"", "all", "void", "MIG-1234", "0,MIG-1234"}) {
    CHECK(gpu_mask(all, host_gpus(gpus), dev).nodes.empty());
    CHECK(gpu_mask(all, host_gpus(gpus), dev).buses.empty());
  }
  CHECK(gpu_mask("0", host_gpus(dir + "/missing"), dev).nodes.empty());
  // A node not on the host is not hidden (its bus directory still is).
  REQUIRE(std::system(("rm " + dev + "/nvidia0").c_str()) == 0);
  CHECK(gpu_mask("0", host_gpus(gpus), dev).nodes.empty());
  CHECK(gpu_mask("0", host_gpus(gpus), dev).buses == V{"0000:3b:00.0"});
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("a libc's release comes from its banner, not its newest symbol version") {
  using rt::hpc::glibc_release;
  std::string libc = std::string("\x7f" "ELF junk\0", 10) +
                     "GNU C Library (Debian GLIBC 2.31-13+deb11u5) stable release version 2.31.\nCopyright";
  CHECK(glibc_release(libc) == "2.31");
  CHECK(glibc_release("release version 2.36.\n") == "2.36");
  CHECK(glibc_release("release version x.y, release version 2.17") == "2.17");
  CHECK(glibc_release("no banner here").empty());
  // The libc this test runs on says what `ldd --version` says.
  std::ifstream f("/lib/x86_64-linux-gnu/libc.so.6", std::ios::binary);
  if (f) {
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(glibc_release(data) == std::string(gnu_get_libc_version()));
  }
}

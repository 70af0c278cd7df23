// A stand-in for libFuzzer where the compiler has none (GCC): runs every
// input named on the command line, then mutations of them chosen by a
// seeded generator, for -runs=N inputs or -max_total_time=S seconds. The
// same target files build with clang's -fsanitize=fuzzer instead.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Input = std::vector<uint8_t>;

// Bytes that make parsers take edges: limits, signs, and format markers.
constexpr uint32_t kInteresting[] = {0,      1,      2,      0x7f,   0x80,    0xff,       0x100,      0x1000,
                                     0x2000, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xffffffff};

void mutate(Input& in, std::mt19937_64& rng, const std::vector<Input>& corpus) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!in.empty()) in[pick(in.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        if (!in.empty()) in[pick(in.size())] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // an interesting little-endian value of 1, 2 or 4 bytes
        if (in.size() < 4) break;
        uint32_t v = kInteresting[pick(std::size(kInteresting))];
        size_t width = size_t{1} << (rng() % 3), at = pick(in.size() - width + 1);
        for (size_t i = 0; i < width; ++i) in[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3:  // cut the end
        if (!in.empty()) in.resize(pick(in.size()));
        break;
      case 4: {  // insert random bytes
        size_t at = pick(in.size() + 1), n = 1 + pick(16);
        Input more(n);
        for (auto& b : more) b = static_cast<uint8_t>(rng());
        in.insert(in.begin() + static_cast<long>(at), more.begin(), more.end());
        break;
      }
      case 5: {  // copy a stretch within the input
        if (in.size() < 2) break;
        size_t from = pick(in.size()), to = pick(in.size()), n = 1 + pick(std::min<size_t>(64, in.size() - from));
        n = std::min(n, in.size() - to);
        std::memmove(in.data() + to, in.data() + from, n);
        break;
      }
      default: {  // splice with another input
        const Input& other = corpus[pick(corpus.size())];
        if (other.empty()) break;
        size_t at = pick(in.size() + 1), from = pick(other.size()), n = 1 + pick(other.size() - from);
        in.insert(in.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                  other.begin() + static_cast<long>(from + n));
        break;
      }
    }
  }
}

// A file, or every file in a directory (a corpus, as libFuzzer takes it).
bool read_inputs(const std::string& path, std::vector<Input>& corpus) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.emplace_back(path);
  }
  for (const auto& file : files) {
    std::ifstream f(file, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "fuzz: cannot read `%s`\n", file.c_str());
      return false;
    }
    corpus.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000, seconds = 0;
  uint64_t seed = 1;
  std::vector<Input> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0)
      runs = std::atol(a.c_str() + 6);
    else if (a.rfind("-max_total_time=", 0) == 0)
      seconds = std::atol(a.c_str() + 16);
    else if (a.rfind("-seed=", 0) == 0)
      seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a[0] == '-')
      continue;  // other libFuzzer flags mean nothing here
    else if (!read_inputs(a, corpus))
      return 2;
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const auto& in : corpus) LLVMFuzzerTestOneInput(in.data(), in.size());
  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  long done = 0;
  for (; seconds ? std::chrono::steady_clock::now() < deadline : done < runs; ++done) {
    Input in = corpus[static_cast<size_t>(rng() % corpus.size())];
    mutate(in, rng, corpus);
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  std::printf("fuzz: %zu inputs and %ld mutations, no crash (seed %llu)\n", corpus.size(), done,
              static_cast<unsigned long long>(seed));
  return 0;
}

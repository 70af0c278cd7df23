// spawn_bench ROUNDS 'label|prog arg...' ...: starts each command in turn,
// ROUNDS times interleaved (A B C A B C ...), and prints per-command median
// wall time, peak RSS, and the median of per-round ratios between commands.
// Interleaving makes the ratios robust on a noisy machine.
// SPAWN_BENCH_SHUFFLE=1: each round in an order of its own (a fixed seed),
// the last command given always last. What a command leaves the kernel
// to finish after it exits (deferred frees, a FUSE teardown) slows the
// one after it: in a fixed order, always the same one. The last place is
// for a command whose aftermath is large (ch-run's SquashFS mount).
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct Cmd {
  std::string label;
  std::vector<std::string> argv;
  std::vector<double> ms;
  long max_rss_kib = 0;
};

double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool run_once(Cmd& c) {
  std::vector<char*> argv;
  for (auto& a : c.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  double t0 = now_ms();
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  c.ms.push_back(now_ms() - t0);
  c.max_rss_kib = std::max(c.max_rss_kib, ru.ru_maxrss);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: spawn_bench ROUNDS 'label|prog arg...' ...\n");
    return 2;
  }
  int rounds = std::atoi(argv[1]);
  std::vector<Cmd> cmds;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    Cmd c;
    c.label = s.substr(0, s.find('|'));
    std::string rest = s.substr(s.find('|') + 1);
    size_t p = 0;
    while (p < rest.size()) {
      size_t q = rest.find(' ', p);
      if (q == std::string::npos) q = rest.size();
      if (q > p) c.argv.push_back(rest.substr(p, q - p));
      p = q + 1;
    }
    cmds.push_back(std::move(c));
  }
  for (auto& c : cmds)  // warm-up, and a check that each command works
    for (int w = 0; w < 20; ++w)
      if (!run_once(c)) {
        std::fprintf(stderr, "spawn_bench: `%s` failed\n", c.label.c_str());
        return 1;
      }
  for (auto& c : cmds) c.ms.clear();
  const char* shuffle = std::getenv("SPAWN_BENCH_SHUFFLE");
  std::vector<size_t> order(cmds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 random(1);
  for (int r = 0; r < rounds; ++r) {
    if (shuffle && *shuffle == '1') std::shuffle(order.begin(), order.end() - 1, random);
    for (size_t i : order) run_once(cmds[i]);
  }

  std::printf("%-28s %10s %10s %12s\n", "command", "median ms", "mean ms", "peak RSS KiB");
  for (auto& c : cmds) {
    double sum = 0;
    for (double m : c.ms) sum += m;
    std::printf("%-28s %10.3f %10.3f %12ld\n", c.label.c_str(), median(c.ms), sum / static_cast<double>(c.ms.size()),
                c.max_rss_kib);
  }
  std::printf("\nratios (median of per-round ratios, %d rounds):\n", rounds);
  for (size_t a = 0; a < cmds.size(); ++a)
    for (size_t b = 0; b < cmds.size(); ++b) {
      if (a == b) continue;
      std::vector<double> r;
      for (size_t i = 0; i < cmds[a].ms.size(); ++i) r.push_back(cmds[a].ms[i] / cmds[b].ms[i]);
      std::printf("  %-28s / %-28s = %.2f\n", cmds[a].label.c_str(), cmds[b].label.c_str(), median(r));
    }
  return 0;
}

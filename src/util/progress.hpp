// Progress of long work (import, convert, pull --squash): bytes done, rate
// and time left, redrawn on one terminal line. Quiet when stderr is no
// terminal or under Slurm, unless -v, which gets a line every few seconds
// and a summary at the end instead (any world).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace rt::util {

class Meter {
public:
  enum class Mode { Off, Bar, Lines };
  // How progress shows for this verbosity (-1 quiet, 0 default, 1 -v) and
  // where stderr goes: a bar on a terminal outside Slurm, lines at -v.
  static Mode mode_for(int verbosity);

  // `what`: "importing `x`"; `total`: bytes expected, 0 if unknown.
  Meter(std::string what, uint64_t total, Mode mode);
  ~Meter();  // clears the bar; see done()
  Meter(const Meter&) = delete;
  Meter& operator=(const Meter&) = delete;

  bool shown() const { return mode_ != Mode::Off; }
  // A total learnt later (worth learning only when shown).
  void set_total(uint64_t total) { total_ = total; }
  // Thread-safe and cheap: the bar is redrawn at most a few times a second.
  void add(uint64_t n);
  // Samples `done` (e.g. a child's bytes read) on a thread of its own,
  // until done() or the end of the meter.
  void follow(std::function<uint64_t()> sample);
  // The work is complete: clears the bar; in line mode, says how much went
  // how fast.
  void done();

  // "12.0 MB / 40.0 MB (30%), 8.0 MB/s, 0:04 left" (no total: "12.0 MB, 8.0 MB/s").
  static std::string line(uint64_t done, uint64_t total, double seconds);

private:
  void show();
  void stop_following();
  void clear_bar();  // with m_ held

  std::string what_;
  uint64_t total_;
  Mode mode_;
  std::atomic<uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_, last_{};
  std::mutex m_;
  bool finished_ = false, drawn_ = false;
  std::thread follower_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace rt::util

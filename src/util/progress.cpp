// Progress of long work on one terminal line, or as lines at -v (any world).
#include "util/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::util {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBarEvery = std::chrono::milliseconds(200);
constexpr auto kLineEvery = std::chrono::seconds(5);
constexpr auto kSampleEvery = std::chrono::milliseconds(250);

// ", 8.0 MB/s", or "" too early to tell.
std::string rate_text(uint64_t done, double seconds) {
  if (seconds < 0.5) return "";
  return ", " + human_bytes(static_cast<uint64_t>(static_cast<double>(done) / seconds)) + "/s";
}

std::string clock_text(double seconds) {
  auto s = static_cast<unsigned long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lu:%02lu", s / 60, s % 60);
  return buf;
}

}  // namespace

Meter::Mode Meter::mode_for(int verbosity) {
  if (verbosity < 0) return Mode::Off;
  // Under Slurm a terminal is srun --pty's, shared by every task: no bar.
  if (stderr_is_tty() && !std::getenv("SLURM_JOB_ID")) return Mode::Bar;
  return verbosity > 0 ? Mode::Lines : Mode::Off;
}

Meter::Meter(std::string what, uint64_t total, Mode mode)
    : what_(std::move(what)), total_(total), mode_(mode), start_(Clock::now()) {}

Meter::~Meter() {
  stop_following();
  std::lock_guard<std::mutex> g(m_);
  clear_bar();
}

void Meter::clear_bar() {
  if (mode_ != Mode::Bar || !drawn_) return;
  ssize_t ignored = ::write(STDERR_FILENO, "\r\033[K", 4);
  (void)ignored;
  set_bar_shown(false);
  drawn_ = false;
}

std::string Meter::line(uint64_t done, uint64_t total, double seconds) {
  std::string s = human_bytes(done);
  if (total) {
    s += " / " + human_bytes(total);
    s += " (" + std::to_string(done >= total ? 100 : done * 100 / total) + "%)";
  }
  if (seconds >= 0.5) {
    s += rate_text(done, seconds);
    if (total && done && done < total)
      s += ", " + clock_text(static_cast<double>(total - done) * seconds / static_cast<double>(done)) + " left";
  }
  return s;
}

void Meter::add(uint64_t n) {
  done_ += n;
  if (mode_ != Mode::Off) show();
}

void Meter::show() {
  const auto now = Clock::now();
  std::unique_lock<std::mutex> g(m_, std::try_to_lock);
  if (!g.owns_lock() || finished_) return;  // another thread is drawing
  if (drawn_ && now - last_ < (mode_ == Mode::Bar ? kBarEvery : kLineEvery)) return;
  if (mode_ == Mode::Lines && !drawn_ && now - start_ < kLineEvery) return;  // the first line after a while
  last_ = now;
  drawn_ = true;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const std::string text = what_ + ": " + line(done_.load(), total_, secs);
  if (mode_ == Mode::Lines) {
    note(text);
    return;
  }
  // One write, so that nothing else lands mid-line.
  std::string bar = "\rrt: " + text + "\033[K";
  ssize_t ignored = ::write(STDERR_FILENO, bar.data(), bar.size());
  (void)ignored;
  set_bar_shown(true);
}

void Meter::follow(std::function<uint64_t()> sample) {
  if (mode_ == Mode::Off) return;
  follower_ = std::thread([this, sample = std::move(sample)] {
    std::unique_lock<std::mutex> g(m_);
    while (!stopping_) {
      g.unlock();
      const uint64_t v = sample();
      if (v > done_.load()) done_ = v;
      show();
      g.lock();
      wake_.wait_for(g, kSampleEvery, [this] { return stopping_; });
    }
  });
}

void Meter::stop_following() {
  {
    std::lock_guard<std::mutex> g(m_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (follower_.joinable()) follower_.join();
}

void Meter::done() {
  stop_following();
  std::lock_guard<std::mutex> g(m_);
  if (finished_) return;
  finished_ = true;
  clear_bar();
  if (mode_ == Mode::Lines) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f s", secs);
    note(what_ + ": " + human_bytes(done_.load()) + " in " + took + rate_text(done_.load(), secs));
  }
}

}  // namespace rt::util

// SquashFS and SIF files read before they are whole; see lazy.hpp.
#include "squash/lazy.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

extern char** environ;

namespace rt::squash {
namespace {

constexpr const char* kIndexMagic = "rt-chunks 1";

constexpr const char* kRefMagic = "rt-lazy-ref 1";

// Where rt-image is: beside the running program, or installed in
// ../libexec/rt/.
std::vector<std::string> fetcher_programs() {
  std::string dir = util::self_program();
  dir.resize(dir.rfind('/'));
  return {dir + "/rt-image", dir + "/../libexec/rt/rt-image"};
}

bool is_hex64(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

uint64_t number_field(std::string_view line, std::string_view key, const std::string& what) {
  const std::string prefix = std::string(key) + " ";
  if (!line.starts_with(prefix)) throw Error(what + ": expected `" + std::string(key) + " N`");
  const std::string_view v = line.substr(prefix.size());
  uint64_t n = 0;
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string_view::npos)
    throw Error(what + ": `" + std::string(line) + "` is not a number");
  for (char c : v) n = n * 10 + static_cast<uint64_t>(c - '0');
  return n;
}

}  // namespace

uint64_t ChunkIndex::length(uint64_t i) const {
  const uint64_t at = offset(i);
  return at >= size ? 0 : std::min(chunk_size, size - at);
}

uint64_t chunk_size_for(uint64_t size) {
  uint64_t c = lazy::kMinChunk;
  while ((size + c - 1) / c > lazy::kMaxChunks) c *= 2;
  return c;
}

std::string format_chunk_index(const ChunkIndex& index) {
  std::string out = std::string(kIndexMagic) + "\nchunk-size " + std::to_string(index.chunk_size) + "\nsize " +
                    std::to_string(index.size) + "\n";
  out.reserve(out.size() + index.digests.size() * 65);
  for (const auto& d : index.digests) out += d + "\n";
  return out;
}

ChunkIndex parse_chunk_index(const std::string& text, const std::string& what) {
  if (text.empty() || text.back() != '\n') throw Error(what + ": not a chunk index (it does not end a line)");
  const std::vector<std::string> lines = util::split(std::string_view(text).substr(0, text.size() - 1), '\n');
  if (lines.size() < 3 || lines[0] != kIndexMagic) throw Error(what + ": not a chunk index (no `rt-chunks 1` line)");
  ChunkIndex index;
  index.chunk_size = number_field(lines[1], "chunk-size", what);
  index.size = number_field(lines[2], "size", what);
  if (index.chunk_size < 4096 || (index.chunk_size & (index.chunk_size - 1)) || index.chunk_size > (uint64_t{1} << 34))
    throw Error(what + ": chunk size " + std::to_string(index.chunk_size) + " is not a power of two from 4 KiB");
  const uint64_t count = (index.size + index.chunk_size - 1) / index.chunk_size;
  if (count != lines.size() - 3)
    throw Error(what + ": " + std::to_string(lines.size() - 3) + " digests for " + std::to_string(count) + " chunks");
  index.digests.reserve(count);
  for (size_t i = 3; i < lines.size(); ++i) {
    if (!is_hex64(lines[i])) throw Error(what + ": line " + std::to_string(i + 1) + " is not a SHA-256 digest");
    index.digests.emplace_back(lines[i]);
  }
  return index;
}

std::string lazy_ref_name(std::string_view ref) {
  if (ref.starts_with("oras://")) ref.remove_prefix(7);
  while (ref.starts_with("/")) ref.remove_prefix(1);
  return store::escape_name(ref);
}

std::string lazy_ref_note(const std::string& hex, const std::string& manifest) {
  return std::string(kRefMagic) + "\n" + hex + "\n" + manifest + "\n";
}

std::optional<LazyEntry> find_lazy_entry(const store::Root& root, std::string_view ref) {
  std::string name;
  try {
    name = lazy_ref_name(ref);
  } catch (const Error&) {
    return std::nullopt;
  }
  util::UniqueFd refs = root.dir(std::string(lazy::kDir) + "/" + lazy::kRefsDir, false);
  if (!refs) return std::nullopt;
  const auto note = util::read_owned_at(refs.get(), name, 4096);
  if (!note) return std::nullopt;
  const auto lines = util::split(*note, '\n');
  if (lines.size() < 3 || lines[0] != kRefMagic || !is_hex64(lines[1])) return std::nullopt;
  util::UniqueFd dir = root.dir(std::string(lazy::kDir) + "/" + lines[1], false);
  if (!dir) return std::nullopt;
  LazyEntry e;
  e.dir = root.sub(std::string(lazy::kDir) + "/" + lines[1]);
  struct stat st;
  e.complete = ::fstatat(dir.get(), lazy::kComplete, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
  if (!e.complete && (::fstatat(dir.get(), lazy::kHave, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)))
    return std::nullopt;
  return e;
}

bool Scan::asked(uint64_t first, uint64_t last) {
  asked_ += last - first + 1;
  if (started_ || count_ == 0 || asked_ < kMin || asked_ * kShare < count_) return false;
  started_ = true;
  next_ = (last + 1) % count_;
  return true;
}

std::optional<std::pair<uint64_t, uint64_t>> Scan::next(const std::function<bool(uint64_t)>& settled, uint64_t most) {
  auto pass = [this] {
    const uint64_t i = next_;
    next_ = (next_ + 1) % count_;
    ++seen_;
    return i;
  };
  while (left()) {
    const uint64_t first = pass();
    if (settled(first)) continue;
    uint64_t last = first;
    while (left() && next_ == last + 1 && last + 1 - first < most && !settled(next_)) last = pass();
    return std::pair(first, last);
  }
  return std::nullopt;
}

bool lazy::background_wanted() {
  const char* env = std::getenv("RT_LAZY_BACKGROUND");
  return !(env && std::string_view(env) == "0");
}

std::optional<std::pair<uint64_t, uint64_t>> ReadAhead::read(uint64_t first, uint64_t last, bool there) {
  Stream* s = nullptr;
  for (auto& c : streams_)
    if (c.end != kNone && first <= c.end + 1 && first + kSlack >= c.end) s = &c;
  if (!s) {
    if (there) return std::nullopt;
    s = &*std::min_element(streams_.begin(), streams_.end(),
                           [](const Stream& x, const Stream& y) { return x.used < y.used; });
    *s = Stream{last, last - first, last, ++tick_};
    return std::nullopt;
  }
  s->used = ++tick_;
  if (last > s->end) s->run += last - s->end, s->end = last;
  if (s->run < kRunBeforeAhead) return std::nullopt;
  const uint64_t window = std::min(kMaxWindow, s->run);
  const uint64_t from = std::max(s->wanted + 1, s->end + 1);
  if (from > s->end + window / 2 || from >= count_) return std::nullopt;
  s->wanted = std::min(count_ - 1, s->end + window);
  return std::pair(from, s->wanted);
}

LazySource::LazySource(const std::string& dir) : dir_(dir) {
  const std::string file = dir + "/" + lazy::kFile;
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw SysError{errno, "stat", file};
  size_ = static_cast<uint64_t>(st.st_size);
  // The chunk size from the index's head; the fetcher checks the rest.
  const std::string chunks = dir + "/" + lazy::kChunks;
  util::UniqueFd cfd = util::open_fd(chunks, O_RDONLY);
  const std::string head = util::read_at(cfd.get(), 0, 64, chunks);
  const auto lines = util::split(head, '\n');
  if (lines.size() < 3 || lines[0] != kIndexMagic) throw Error("cache entry `" + dir + "`: `" + chunks + "` is no chunk index");
  chunk_size_ = number_field(lines[1], "chunk-size", chunks);
  if (chunk_size_ == 0) throw Error("cache entry `" + dir + "`: chunk size 0");
  count_ = (size_ + chunk_size_ - 1) / chunk_size_;
  const std::string have = dir + "/" + lazy::kHave;
  have_fd_ = util::open_fd(have, O_RDONLY).release();
  if (::fstat(have_fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != count_) {
    ::close(have_fd_);
    throw Error("cache entry `" + dir + "`: `" + have + "` does not have one byte a chunk");
  }
  ::flock(have_fd_, LOCK_SH);  // in use: eviction passes it by
  if (count_ > 0) {
    void* m = ::mmap(nullptr, count_, PROT_READ, MAP_SHARED, have_fd_, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      ::close(have_fd_);
      throw SysError{e, "mmap", have};
    }
    have_ = static_cast<const unsigned char*>(m);
  }
  in_flight_.resize(count_);
  ahead_ = ReadAhead(count_);
  scan_ = Scan(count_);
}

LazySource::~LazySource() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
    wanted_.clear();
  }
  wanted_cv_.notify_all();
  for (auto& t : wanters_) t.join();
  for (auto& f : fetchers_) {
    if (f.fd >= 0) ::close(f.fd);
    if (f.pid > 0) ::waitpid(f.pid, nullptr, 0);  // it ends on the closed socket
  }
  if (have_) ::munmap(const_cast<unsigned char*>(have_), count_);
  if (have_fd_ >= 0) ::close(have_fd_);
}

bool LazySource::present(uint64_t first, uint64_t last) const {
  for (uint64_t i = first; i <= last; ++i)
    if (__atomic_load_n(&have_[i], __ATOMIC_ACQUIRE) != 1) return false;
  return true;
}

std::optional<std::pair<uint64_t, uint64_t>> LazySource::chunks(uint64_t offset, uint64_t length) const {
  if (offset >= size_ || length > size_ - offset) return std::nullopt;
  return std::pair(offset / chunk_size_, (offset + length - 1) / chunk_size_);
}

bool LazySource::need(uint64_t offset, uint64_t length, std::string* why) {
  if (length == 0) return true;
  const auto range = chunks(offset, length);
  if (!range) {
    *why = "bytes " + std::to_string(offset) + "+" + std::to_string(length) + " lie past the file";
    return false;
  }
  const auto [first, last] = *range;
  const bool there = present(first, last);
  std::optional<std::pair<uint64_t, uint64_t>> ahead;
  {
    std::lock_guard<std::mutex> g(mu_);
    ahead = ahead_.read(first, last, there);
    if (!there) asked(first, last);
  }
  if (ahead) want_chunks(ahead->first, ahead->second);  // not while stopping: it looks
  return there || fetch(first, last, why);              // fetch looks again first
}

bool LazySource::fetch(uint64_t first, uint64_t last, std::string* why) {
  std::unique_lock<std::mutex> g(mu_);
  Fetcher* f = nullptr;
  for (;;) {
    if (present(first, last)) return true;  // fetched while this thread waited
    bool coming = false;  // a missing chunk that a request in flight brings
    for (uint64_t i = first; i <= last && !coming; ++i) coming = in_flight_[i] && !present(i, i);
    if (!coming) {
      for (auto& c : fetchers_)
        if (!c.busy && (c.pid > 0 || !f)) f = &c;  // a running one first
      if (f) break;
    }
    idle_.wait(g);
  }
  f->busy = true;
  std::fill(in_flight_.begin() + first, in_flight_.begin() + last + 1, 1);
  g.unlock();
  const bool ok = (f->pid > 0 || start(*f, why)) && ask(*f, first, last, why);
  g.lock();
  std::fill(in_flight_.begin() + first, in_flight_.begin() + last + 1, 0);
  f->busy = false;
  idle_.notify_all();  // a free fetcher, and chunks that came
  return ok;
}

void LazySource::serving() {
  std::lock_guard<std::mutex> g(mu_);
  if (count_ == 0 || present(0, count_ - 1)) return;
  for (size_t i = 0; i < kReady; ++i) {
    Fetcher& f = fetchers_[i];
    std::string why;
    if (f.pid <= 0 && !f.busy && !start(f, &why)) {
      util::debug("no fetcher yet (" + why + "): the first miss starts one");
      return;
    }
  }
}

bool LazySource::has(uint64_t offset, uint64_t length) const {
  if (length == 0) return true;
  const auto range = chunks(offset, length);
  return range && present(range->first, range->second);
}

void LazySource::want(uint64_t offset, uint64_t length) {
  if (length == 0 || offset >= size_) return;
  const auto range = chunks(offset, std::min(length, size_ - offset));
  want_chunks(range->first, range->second);
}

void LazySource::want_chunks(uint64_t first, uint64_t last) {
  if (present(first, last)) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_) return;
    for (uint64_t a = first; a <= last; a += kMaxAhead + 1) wanted_.emplace_back(a, std::min(last, a + kMaxAhead));
    asked(first, last);
    if (wanters_.size() < kWanters) wanters_.emplace_back([this] { want_loop(); });
  }
  wanted_cv_.notify_all();
}

void LazySource::asked(uint64_t first, uint64_t last) {
  if (stopping_ || !background_ || !scan_.asked(first, last)) return;
  while (wanters_.size() < kWanters) wanters_.emplace_back([this] { want_loop(); });
  wanted_cv_.notify_all();
}

void LazySource::want_loop() {
  std::unique_lock<std::mutex> g(mu_);
  auto settled = [this](uint64_t i) { return in_flight_[i] || present(i, i); };
  for (;;) {
    wanted_cv_.wait(g, [this] { return stopping_ || !wanted_.empty() || scan_.left(); });
    if (stopping_) return;
    uint64_t first = 0, last = 0;
    if (!wanted_.empty()) {
      std::tie(first, last) = wanted_.front();
      wanted_.pop_front();
    } else if (auto piece = scan_.next(settled, std::max<uint64_t>(1, kMaxScanPiece / chunk_size_))) {
      std::tie(first, last) = *piece;
    } else {
      continue;
    }
    // What is there or on its way is left out. A hint may fail: a read
    // that needs the chunk asks again, and says why.
    while (first <= last && settled(first)) ++first;
    while (last > first && settled(last)) --last;
    if (first > last) continue;
    g.unlock();
    std::string why;
    fetch(first, last, &why);
    g.lock();
  }
}

bool LazySource::start(Fetcher& f, std::string* why) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  int rc = ENOENT;
  for (const auto& p : fetcher_programs()) {
    if (::access(p.c_str(), X_OK) != 0) continue;
    // The first fetcher alone fills the file in the background.
    std::vector<char*> argv{const_cast<char*>(p.c_str()), const_cast<char*>("lazy-fetch"),
                            const_cast<char*>(&f == &fetchers_[0] ? "--fill" : "--no-fill"),
                            const_cast<char*>(dir_.c_str()), nullptr};
    rc = ::posix_spawn(&f.pid, p.c_str(), &fa, nullptr, argv.data(), environ);
    break;
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    f.pid = -1;
    *why = "cannot start the fetcher (rt-image lazy-fetch): " + std::string(std::strerror(rc));
    return false;
  }
  f.fd = sv[0];
  f.pending.clear();
  return true;
}

bool LazySource::ask(Fetcher& f, uint64_t first, uint64_t last, std::string* why) {
  const std::string line = "FETCH " + std::to_string(first) + " " + std::to_string(last) + "\n";
  bool ok = true;
  for (size_t sent = 0; ok && sent < line.size();) {
    const ssize_t n = ::send(f.fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) sent += static_cast<size_t>(n);
  }
  std::string reply;
  while (ok) {
    const size_t nl = f.pending.find('\n');
    if (nl != std::string::npos) {
      reply = f.pending.substr(0, nl);
      f.pending.erase(0, nl + 1);
      if (!reply.starts_with("GOT ")) break;
      idle_.notify_all();  // a chunk of the request came: its readers go on
      continue;
    }
    char buf[4096];
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok = false;
    else f.pending.append(buf, static_cast<size_t>(n));
  }
  if (!ok) {
    // Gone: the next miss starts another.
    ::close(f.fd);
    f.fd = -1;
    ::waitpid(f.pid, nullptr, 0);
    f.pid = -1;
    *why = "the fetcher of `" + dir_ + "` ended";
    return false;
  }
  if (reply == "OK" && present(first, last)) return true;
  *why = reply.starts_with("ERR ") ? reply.substr(4) : "the fetcher answered `" + reply + "`";
  return false;
}

}  // namespace rt::squash

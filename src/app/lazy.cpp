// rt exec oras://REF without the download: the node cache's entries made
// (lazy_open) and filled (lazy_fetch) from the registry by range requests
// (host); see squash/lazy.hpp for the layout and the reader's side.
//
// Why a chunk read this way can be trusted: the manifest is what the user
// named (a digest, or a tag the trust policy admitted); the SIF layer's
// annotation in it names the chunk index by its digest, and the index
// names every chunk by its SHA-256. A chunk is written into the file only
// once its bytes hash to the index's digest, and a chunk the cache had
// when this process started is hashed again before it first vouches for it
// (one marked later was marked by a fetcher beside it, after its check). So every
// byte the SquashFS server reads is a byte of the file the manifest names,
// however the registry, the network or a crash behaved. A whole file is
// checked once more against the layer's digest before it is marked
// complete.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/oras.hpp"
#include "app/store.hpp"
#include "hpc/site_config.hpp"
#include "image/oras.hpp"
#include "image/registry.hpp"
#include "image/sha256.hpp"
#include "run/sqfs_facts.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "squash/lazy.hpp"
#include "squash/sif.hpp"
#include "squash/sqfs.hpp"
#include "store/layout.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"

namespace rt::app {
namespace {

namespace lz = squash::lazy;

constexpr uint64_t kDefaultCacheBytes = uint64_t{20} << 30;
// One range request at most. A registry's cost is per request as much as
// per byte (Debian's docker-registry here: some 12 ms of its processor a
// request, whatever its length, against 1 ms a MB), and chunks are kept
// as they come, so a long request keeps no read waiting for its end: the
// server asks for up to 64 MiB at once when a file is read whole.
constexpr uint64_t kMaxRequest = 64 << 20;
// The background fill's piece: a read that comes meanwhile waits for it.
constexpr uint64_t kFillRequest = 8 << 20;
// A fetcher fills the file in the background once no read has come for
// this long.
constexpr int kIdleMs = 300;

std::string hex_of(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

// "20G", "512M", "1048576": bytes.
uint64_t parse_bytes(const std::string& text, const std::string& where) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  int shift = 0;
  const std::string unit = text.substr(used == 0 ? text.size() : used);
  if (unit == "K" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "GiB") shift = 30;
  else if (unit == "T" || unit == "TiB") shift = 40;
  else if (!unit.empty()) used = 0;
  if (used == 0 || text.empty() || text[0] == '-' || (shift && v > (~0ULL >> shift)))
    throw Error(where + ": `" + text + "` is not a size (bytes, or a number and K, M, G or T)");
  return static_cast<uint64_t>(v) << shift;
}

// The node cache's size limit: RT_LAZY_CACHE_SIZE, else the site's
// lazy.cache-size, else 20 GiB.
uint64_t cache_limit() {
  if (const char* env = std::getenv("RT_LAZY_CACHE_SIZE"); env && *env) return parse_bytes(env, "RT_LAZY_CACHE_SIZE");
  const hpc::SiteConfig& site = hpc::load_site_config();
  const auto v = site.get("lazy.cache-size");
  if (v.empty()) return kDefaultCacheBytes;
  if (v.size() != 1) throw Error("site configuration `" + site.file + "`: lazy.cache-size takes one size");
  return parse_bytes(v[0], "site configuration `" + site.file + "`, lazy.cache-size");
}

uint64_t allocated(int dirfd, const char* name) {
  struct stat st;
  return ::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

// Removes least recently used entries of STORE/lazy, none in use (a server
// holds a shared lock on its `have`) and never `keep`, until what the
// files take is within the limit.
void evict(const store::Root& root, const std::string& keep) {
  const uint64_t limit = cache_limit();
  util::UniqueFd lazy = root.dir(lz::kDir, false);
  if (!lazy) return;
  struct Entry {
    std::string hex;
    uint64_t bytes;
    int64_t used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  for (const auto& name : util::list_names(lazy.get(), root.sub(lz::kDir))) {
    if (name.size() != 64 || name.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    util::UniqueFd d(::openat(lazy.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) continue;
    struct stat st;
    const int64_t used = ::fstatat(d.get(), lz::kHave, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_atim.tv_sec : 0;
    const uint64_t bytes = allocated(d.get(), lz::kFile);
    entries.push_back({name, bytes, used});
    total += bytes;
  }
  if (total <= limit) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const auto& e : entries) {
    if (total <= limit) break;
    if (e.hex == keep) continue;
    const std::string dir = root.sub(std::string(lz::kDir) + "/" + e.hex);
    util::UniqueFd have(::open((dir + "/" + lz::kHave).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (have && ::flock(have.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in use
    // Out of its name first: a reader never opens half an entry.
    const std::string gone = root.sub(std::string(store::kTmpDir) + "/lazy-evicted-" + e.hex);
    if (::rename(dir.c_str(), gone.c_str()) != 0) continue;
    util::remove_tree(gone);
    total -= std::min(total, e.bytes);
    util::info("node cache: removed `" + e.hex.substr(0, 12) + "` (" + util::human_bytes(e.bytes) + ")");
  }
}

// A cache entry's fetcher: chunks from the registry into the file, each
// checked against the index first.
class Fetcher {
public:
  // `registry`, when given, is the entry's registry already connected and
  // authenticated (rt-image lazy-open's own), kept by the caller.
  // `kept`, when given, is told of each chunk as it is kept.
  explicit Fetcher(const std::string& dir, image::Registry* registry = nullptr,
                   std::function<void(uint64_t)> kept = {})
      : dir_(dir), kept_(std::move(kept)) {
    const std::string where = "cache entry `" + dir + "`";
    const auto source = nlohmann::json::parse(util::read_file_if_exists(dir + "/" + lz::kSource).value_or(""), nullptr,
                                              false);
    if (!source.is_object() || !source.contains("reference") || !source.contains("digest"))
      throw Error(where + ": no readable " + lz::kSource);
    ref_ = store::parse_reference(source["reference"].get<std::string>());
    layer_.digest = source["digest"].get<std::string>();
    layer_.size = source.value("size", int64_t{-1});
    layer_.media_type = image::oras::kSifLayer;
    image::RegistryOptions tls = image::registry_options(source.value("ca_file", std::string()),
                                                         source.value("insecure", false), source.value("plain_http", false));
    if (!registry) own_registry_ = std::make_unique<image::Registry>(ref_, tls);
    registry_ = registry ? registry : own_registry_.get();
    index_ = squash::parse_chunk_index(util::read_file_if_exists(dir + "/" + lz::kChunks).value_or(""),
                                       where + ", " + lz::kChunks);
    if (layer_.size < 0 || index_.size != static_cast<uint64_t>(layer_.size))
      throw Error(where + ": the chunk index is for " + std::to_string(index_.size) + " bytes, the file has " +
                  std::to_string(layer_.size));
    file_ = util::open_fd(dir + "/" + lz::kFile, O_RDWR | O_NOFOLLOW);
    const std::string have = dir + "/" + lz::kHave;
    have_ = util::open_fd(have, O_RDWR | O_NOFOLLOW);
    struct stat st;
    if (::fstat(file_.get(), &st) != 0) throw SysError{errno, "stat", dir + "/" + lz::kFile};
    mtime_ = st.st_mtim;
    if (::fstat(have_.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) != index_.count())
      throw Error(where + ": `have` does not have one byte a chunk");
    // Shared with the entry's other fetchers: a chunk one fetched, the
    // others see (and check before they vouch for it).
    if (index_.count() > 0) {
      void* m = ::mmap(nullptr, index_.count(), PROT_READ | PROT_WRITE, MAP_SHARED, have_.get(), 0);
      if (m == MAP_FAILED) throw SysError{errno, "mmap", have};
      have_map_ = static_cast<unsigned char*>(m);
    }
    // A chunk `have` claims now may come from a process that crashed
    // before its data reached the disk: checked once before it is vouched
    // for. One missing now that turns up later was marked by a fetcher
    // running beside this one, after it checked and wrote the chunk: not
    // read and hashed again (the filling fetcher passes over every chunk).
    buf_.reserve(index_.chunk_size);
    checked_.resize(index_.count());
    for (uint64_t i = 0; i < index_.count(); ++i) checked_[i] = __atomic_load_n(&have_map_[i], __ATOMIC_ACQUIRE) != 1;
  }
  ~Fetcher() {
    if (have_map_) ::munmap(have_map_, index_.count());
  }
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  uint64_t chunk_size() const { return index_.chunk_size; }

  // The connection made and the registry's authentication done, before
  // the first chunk is asked for. A failure is left to that request.
  void connect() {
    try {
      registry_->has_blob(layer_.digest);
    } catch (const Error& e) {
      util::debug(std::string("fetcher: not connected yet: ") + e.what());
    }
  }

  // Chunks first..last there and checked, runs of missing ones fetched in
  // requests of at most `most` bytes; false with the reason.
  bool ensure(uint64_t first, uint64_t last, std::string* why, uint64_t most = kMaxRequest) {
    if (first > last || last >= index_.count()) {
      *why = "chunks " + std::to_string(first) + "-" + std::to_string(last) + " are not in the file";
      return false;
    }
    try {
      for (uint64_t i = first; i <= last;) {
        if (there(i)) {
          ++i;
          continue;
        }
        // A run of missing chunks, one request (no chunk past `last`: see
        // ARCHITECTURE, what a lazy start waits on).
        uint64_t end = i;
        while (end + 1 <= last && !there(end + 1) && (end + 2 - i) * index_.chunk_size <= most) ++end;
        fetch(i, end);
        i = end + 1;
      }
    } catch (const Error& e) {
      *why = e.what();
      return false;
    }
    return true;
  }

  // One piece of background work: the next missing run. False when there
  // is none left (then the whole file is checked and marked complete).
  bool fill_some(std::string* why) {
    while (next_ < index_.count() && there(next_)) ++next_;
    if (next_ >= index_.count()) {
      finish();
      return false;
    }
    uint64_t last = next_;
    while (last + 1 < index_.count() && (last + 2 - next_) * index_.chunk_size <= kFillRequest) ++last;
    return ensure(next_, last, why, kFillRequest);
  }

  // The whole file against the layer's digest, then `complete`. Hashed by
  // a thread of the lowest priority (SCHED_IDLE, that thread alone): on a
  // busy node the check waits for an idle processor instead of slowing the
  // program that reads the file (a tar of it: half a second in ten).
  void finish() {
    struct stat st;
    if (::stat((dir_ + "/" + lz::kComplete).c_str(), &st) == 0) return;
    std::string digest;
    std::exception_ptr failed;
    std::thread([&] {
      sched_param none{};
      (void)::sched_setscheduler(0, SCHED_IDLE, &none);
      try {
        image::Sha256 h;
        for (uint64_t off = 0; off < index_.size;) {
          const std::string part = util::read_at(file_.get(), off, std::min<uint64_t>(uint64_t{1} << 20, index_.size - off),
                                                 dir_ + "/" + lz::kFile);
          if (part.empty()) break;
          h.update(part.data(), part.size());
          off += part.size();
        }
        digest = h.digest();
      } catch (...) {
        failed = std::current_exception();
      }
    }).join();
    if (failed) std::rethrow_exception(failed);
    if (digest != layer_.digest) {
      util::warn("cache entry `" + dir_ + "`: the whole file does not hash to " + layer_.digest + "; not marked complete");
      return;
    }
    ::fdatasync(file_.get());
    util::UniqueFd d = util::open_fd(dir_, O_RDONLY | O_DIRECTORY);
    util::link_new_file_at(d.get(), lz::kComplete, layer_.digest + "\n");
    util::info("cache entry `" + dir_ + "` is whole");
  }

private:
  bool there(uint64_t i) {
    if (__atomic_load_n(&have_map_[i], __ATOMIC_ACQUIRE) != 1) return false;
    if (checked_[i]) return true;
    // There when this process started: checked once before it is vouched for.
    const std::string bytes = util::read_at(file_.get(), index_.offset(i), index_.length(i), dir_ + "/" + lz::kFile);
    if (hex_of(image::sha256_digest(bytes)) == index_.digests[i]) return checked_[i] = true;
    util::warn("cache entry `" + dir_ + "`: chunk " + std::to_string(i) + " is not what the index says; fetching it again");
    mark(i, 0);
    return false;
  }

  // One request; each chunk kept as soon as it is whole.
  void fetch(uint64_t first, uint64_t last) {
    const uint64_t off = index_.offset(first);
    const uint64_t len = index_.offset(last) + index_.length(last) - off;
    uint64_t i = first;  // the chunk coming into buf_
    buf_.clear();
    registry_->get_blob_range(layer_, off, len, [&](std::string_view data) {
      while (!data.empty()) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(index_.length(i) - buf_.size(), data.size()));
        buf_.append(data.substr(0, take));
        data.remove_prefix(take);
        if (buf_.size() == index_.length(i)) keep(i++);
      }
    });
  }

  // Chunk i, whole in buf_: checked, written, marked (buf_ emptied).
  void keep(uint64_t i) {
    if (hex_of(image::sha256_digest(buf_)) != index_.digests[i])
      throw Error("registry `" + ref_.registry + "` sent chunk " + std::to_string(i) + " (bytes " +
                  std::to_string(index_.offset(i)) + "+" + std::to_string(index_.length(i)) + ") of `" + ref_.str() +
                  "` (" + layer_.digest + ") with other bytes than its index says: nothing of it was kept");
    util::pwrite_all(file_.get(), buf_, index_.offset(i), dir_ + "/" + lz::kFile);
    // The file keeps its first modification time: caches keyed by the
    // file's identity (its server, its facts) stay valid as it fills.
    const timespec times[2] = {{0, UTIME_OMIT}, mtime_};
    ::futimens(file_.get(), times);
    mark(i, 1);
    checked_[i] = true;
    buf_.clear();
    if (kept_) kept_(i);
  }

  void mark(uint64_t i, unsigned char v) { __atomic_store_n(&have_map_[i], v, __ATOMIC_RELEASE); }

  std::string dir_;
  store::Reference ref_;
  image::Descriptor layer_;
  std::unique_ptr<image::Registry> own_registry_;
  image::Registry* registry_ = nullptr;
  squash::ChunkIndex index_;
  util::UniqueFd file_, have_;
  timespec mtime_{};
  unsigned char* have_map_ = nullptr;  // `have`, mapped shared
  std::vector<bool> checked_;
  std::function<void(uint64_t)> kept_;
  std::string buf_;  // the chunk coming: one buffer for all
  uint64_t next_ = 0;
};

// The in-process source of a fetcher (rt-image's own reads of an entry).
class FetcherSource final : public squash::Source {
public:
  explicit FetcherSource(Fetcher& f) : f_(f), chunk_(f.chunk_size()) {}
  bool need(uint64_t offset, uint64_t length, std::string* why) override {
    if (length == 0) return true;
    return f_.ensure(offset / chunk_, (offset + length - 1) / chunk_, why);
  }

private:
  Fetcher& f_;
  uint64_t chunk_;
};

}  // namespace

std::string lazy_open(const std::string& ref_text, const PullOptions& o) {
  util::log_init(o.verbosity);
  const std::string_view text = image::without_oras(ref_text);
  const store::Reference ref = store::parse_reference(text);
  const std::string shown = image::oras::kScheme + ref.str();
  Store store(o.storage);
  const store::Root& root = store.dir();
  const std::string ref_name = squash::lazy_ref_name(ref_text);
  // A node's ranks resolve one reference once: the others wait here and
  // find what the first one made.
  FileLock lock = store.lock_name("oras:" + ref.str());
  if (auto e = squash::find_lazy_entry(root, ref_text)) return e->dir + "/" + lz::kFile;

  const image::RegistryOptions tls = image::registry_options(o.ca_file, o.insecure, o.plain_http);
  image::Registry reg(ref, tls);
  const SifArtifact art = resolve_sif(reg, ref, shown, o);
  const auto& doc = art.doc;
  const auto& j = art.manifest;
  const image::Descriptor& layer = art.layer;
  const std::string hex = hex_of(layer.digest);
  const std::string entry_rel = std::string(lz::kDir) + "/" + hex;
  root.dir(lz::kDir, true);
  root.dir(std::string(lz::kDir) + "/" + lz::kRefsDir, true);

  if (!root.dir(entry_rel, false)) {
    WorkDir work(store.tmp_dir(), "lazy");
    const std::string w = work.path();
    const std::string index_digest = image::chunk_index_digest(j, shown);
    if (index_digest.empty()) {
      // No chunk index (Apptainer's pushes, older rt): the whole file,
      // verified, before anything runs.
      util::info("`" + shown + "` has no chunk index: fetching the whole file (" +
                 util::human_bytes(static_cast<uint64_t>(layer.size)) + ")");
      util::Meter meter("downloading `" + shown + "`", static_cast<uint64_t>(layer.size),
                        util::Meter::mode_for(o.verbosity));
      reg.download_blob(layer, w + "/" + lz::kFile, [&](uint64_t n) { meter.add(n); });
      meter.done();
      util::UniqueFd wd = util::open_fd(w, O_RDONLY | O_DIRECTORY);
      util::link_new_file_at(wd.get(), lz::kComplete, layer.digest + "\n");
    } else {
      image::Descriptor d;
      d.digest = index_digest;
      d.media_type = lz::kMediaType;
      const std::string text_index = reg.get_blob(d);
      const squash::ChunkIndex index =
          squash::parse_chunk_index(text_index, "`" + shown + "` chunk index " + index_digest);
      if (index.size != static_cast<uint64_t>(layer.size))
        throw Error("`" + shown + "`: the chunk index " + index_digest + " is for " + std::to_string(index.size) +
                    " bytes, the SIF layer has " + std::to_string(layer.size));
      util::UniqueFd wd = util::open_fd(w, O_RDONLY | O_DIRECTORY);
      util::UniqueFd f = util::open_fd_at(wd.get(), lz::kFile, O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (::ftruncate(f.get(), static_cast<off_t>(index.size)) != 0) throw SysError{errno, "truncate", w + "/" + lz::kFile};
      util::link_new_file_at(wd.get(), lz::kChunks, text_index);
      util::link_new_file_at(wd.get(), lz::kHave, std::string(index.count(), '\0'));
      nlohmann::json source = {{"reference", ref.str()},     {"digest", layer.digest},     {"size", layer.size},
                               {"ca_file", tls.ca_file},    {"insecure", tls.insecure}, {"plain_http", tls.plain_http},
                               {"manifest", doc.digest}};
      util::link_new_file_at(wd.get(), lz::kSource, source.dump() + "\n");
    }
    if (::rename(w.c_str(), root.sub(entry_rel).c_str()) == 0)
      work.release();
    else if (errno != EEXIST && errno != ENOTEMPTY)
      throw SysError{errno, "rename", w, root.sub(entry_rel)};
  }
  const std::string dir = root.sub(entry_rel);
  // What every start reads first (the head, the tables, the image's
  // config and users), fetched now, once for the node, and the image's
  // facts remembered as rt exec keeps them: the first start need not open
  // and check the image a second time (some 40 ms for a Python image).
  struct stat st;
  if (::stat((dir + "/" + lz::kComplete).c_str(), &st) != 0) {
    Fetcher fetcher(dir, &reg);
    squash::Image img(dir + "/" + lz::kFile, std::make_unique<FetcherSource>(fetcher));
    run::squash_facts(dir + "/" + lz::kFile, root.dir(store::kSqfsFactsDir, true).get(),
                      [&img]() -> squash::Image& { return img; });
  }
  util::UniqueFd refs = root.dir(std::string(lz::kDir) + "/" + lz::kRefsDir, true);
  if (!util::write_file_atomic_at(refs.get(), ref_name, squash::lazy_ref_note(hex, doc.digest)))
    throw Error("cannot record `" + shown + "` in `" + root.sub(std::string(lz::kDir) + "/" + lz::kRefsDir) + "`");
  evict(root, hex);
  util::info("`" + shown + "` is in the node cache (" + layer.digest.substr(0, 19) + ", " +
             util::human_bytes(static_cast<uint64_t>(layer.size)) + ")");
  return dir + "/" + lz::kFile;
}

int lazy_fetch(const std::string& dir, bool fill) {
  // stdin: "FETCH FIRST LAST" lines; stdout: "OK" or "ERR why" for each,
  // after a "GOT I" line for each chunk I below LAST kept meanwhile (a
  // read waiting for it goes on before the request ends).
  uint64_t answering = 0;  // LAST of the request being answered; 0: none
  Fetcher fetcher(dir, nullptr, [&answering](uint64_t i) {
    if (i < answering) util::write_all(1, "GOT " + std::to_string(i) + "\n", "the server's socket");
  });
  const bool background = fill && lz::background_wanted();
  // Started as the image is served, before any read: connected meanwhile.
  if (pollfd p{0, POLLIN, 0}; ::poll(&p, 1, 0) == 0) fetcher.connect();
  std::string in;
  bool idle_done = !background;
  for (;;) {
    pollfd p{0, POLLIN, 0};
    const int n = ::poll(&p, 1, idle_done ? -1 : kIdleMs);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // idle: a piece of the rest
      std::string why;
      if (!fetcher.fill_some(&why)) idle_done = true;
      if (!why.empty()) {
        util::warn(why);
        idle_done = true;
      }
      continue;
    }
    char buf[4096];
    const ssize_t got = ::read(0, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;  // the server is gone
    in.append(buf, static_cast<size_t>(got));
    for (size_t nl; (nl = in.find('\n')) != std::string::npos;) {
      const std::string line = in.substr(0, nl);
      in.erase(0, nl + 1);
      unsigned long long first = 0, last = 0;
      std::string reply;
      if (std::sscanf(line.c_str(), "FETCH %llu %llu", &first, &last) != 2) {
        reply = "ERR bad request";
      } else {
        std::string why;
        answering = last;
        reply = fetcher.ensure(first, last, &why) ? "OK" : "ERR " + why;
        answering = 0;
      }
      for (char& c : reply)
        if (c == '\n') c = ' ';
      util::write_all(1, reply + "\n", "the server's socket");
    }
  }
}

}  // namespace rt::app

namespace rt {

std::string lazy_open(const std::string& ref, const PullOptions& options) { return app::lazy_open(ref, options); }
int lazy_fetch(const std::string& dir, bool fill) { return app::lazy_fetch(dir, fill); }

}  // namespace rt

// SquashFS and SIF files read before they are whole (host -> namespace):
// the node cache's entries, the chunk index that makes each part of a file
// checkable on its own, and the reader's side of a lazy file.
//
// A SIF file pushed by rt to oras:// carries, beside the file, a chunk
// index: the file cut into chunks of one size, each with its SHA-256. The
// index's own digest is an annotation of the file's layer in the manifest,
// so a manifest the user trusts (by digest, or by signature) pins every
// chunk. A node's cache keeps one entry per file:
//
//   STORE/lazy/HEX/image.sif   the file, as large as it will be, holes where
//                              nothing was fetched (HEX: the layer's digest)
//   STORE/lazy/HEX/chunks      the chunk index, checked against the manifest
//   STORE/lazy/HEX/have        one byte a chunk: 1 once fetched and checked
//   STORE/lazy/HEX/source.json where the file comes from (registry, repository,
//                              TLS options)
//   STORE/lazy/HEX/complete    the whole file fetched and checked against the
//                              layer's digest: it is a plain SIF file now
//   STORE/lazy/refs/NAME       what oras://REF resolved to (escaped REF)
//
// Chunks are written by a fetcher only (rt-image, which has the network
// and the hashes); the server that reads the file asks it for the chunks
// it lacks and waits. `have` is a hint: a fetcher checks a chunk against
// the index before it first vouches for it, so a cache left by a crash
// cannot serve a torn chunk.
#pragma once
#include <sys/types.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace rt::store {
class Root;
}

namespace rt::squash {

namespace lazy {
inline constexpr const char* kDir = "lazy";
inline constexpr const char* kRefsDir = "refs";
inline constexpr const char* kFile = "image.sif";
inline constexpr const char* kChunks = "chunks";
inline constexpr const char* kHave = "have";
inline constexpr const char* kSource = "source.json";
inline constexpr const char* kComplete = "complete";
// The annotation of the SIF layer that names the chunk index's blob, and
// the index's media type.
inline constexpr const char* kAnnotation = "org.rt.sif.chunks";
inline constexpr const char* kMediaType = "application/vnd.rt.sif.chunks.v1";
// A file's chunks are 256 KiB, doubled until there are at most this many.
inline constexpr uint64_t kMinChunk = 256 * 1024;
inline constexpr uint64_t kMaxChunks = 32768;
// Whether the rest of a file is fetched beside the reads (a fetcher's
// fill once reads pause, a reader's scan): RT_LAZY_BACKGROUND=0 turns it
// off (a job that wants the registry asked only for what it reads).
bool background_wanted();
}  // namespace lazy

// A file cut into chunks of `chunk_size` bytes (the last one shorter),
// each with its SHA-256 (64 lowercase hex digits).
struct ChunkIndex {
  uint64_t chunk_size = 0;
  uint64_t size = 0;
  std::vector<std::string> digests;
  uint64_t count() const { return digests.size(); }
  // The bytes of chunk `i`: [offset(i), offset(i) + length(i)).
  uint64_t offset(uint64_t i) const { return i * chunk_size; }
  uint64_t length(uint64_t i) const;
};

// The chunk size for a file of `size` bytes.
uint64_t chunk_size_for(uint64_t size);
// "rt-chunks 1\nchunk-size N\nsize N\n" then one digest a line.
std::string format_chunk_index(const ChunkIndex& index);
// Parses that strictly: every count consistent, every digest well formed.
// Throws rt::Error naming `what`.
ChunkIndex parse_chunk_index(const std::string& text, const std::string& what);

// What reads a file asks of it before reading: that [offset, offset +
// length) of the file be there. Returns false, with the reason in `why`,
// when it cannot be.
class Source {
public:
  virtual ~Source() = default;
  virtual bool need(uint64_t offset, uint64_t length, std::string* why) = 0;
  // A hint, which returns at once: [offset, offset + length) will likely
  // be needed soon (a file read from its start is read whole).
  virtual void want(uint64_t /*offset*/, uint64_t /*length*/) {}
  // Whether [offset, offset + length) is there now, without asking for it.
  virtual bool has(uint64_t /*offset*/, uint64_t /*length*/) const { return true; }
  // The image is about to be served: a source that fetches may get ready
  // for the first read now, before any program waits on it.
  virtual void serving() {}
};

// The name in STORE/lazy/refs of oras://REF (`ref` with or without the
// scheme); throws rt::Error for a reference no store name can be made of.
std::string lazy_ref_name(std::string_view ref);
// What that record says: "rt-lazy-ref 1\nHEX\nMANIFEST-DIGEST\n".
std::string lazy_ref_note(const std::string& hex, const std::string& manifest);
// The cache entry (its directory) oras://REF resolved to, when the store
// `root` has both the record and the entry; `complete` says whether the
// file is whole.
struct LazyEntry {
  std::string dir;
  bool complete = false;
};
std::optional<LazyEntry> find_lazy_entry(const store::Root& root, std::string_view ref);

// Follows a source's reads as up to four streams of chunks read in order
// (a directory's files and the fragments of its small files are two runs
// that a tree read interleaves) and says what to fetch ahead of them: once
// a stream has gone kRunBeforeAhead chunks in order (4 MiB at the smallest
// chunk size: a program's scattered reads, Python's imports, rarely do),
// a window as long as the run, at most kMaxWindow chunks, past its last
// read, topped up in batches when less than half of it is left. Not
// thread-safe: LazySource calls it under its lock.
class ReadAhead {
public:
  static constexpr uint64_t kRunBeforeAhead = 16;
  static constexpr uint64_t kMaxWindow = 64;
  // A few chunks back still count as in order: the kernel's reads of one
  // file reach the server's threads in any order.
  static constexpr uint64_t kSlack = 4;

  explicit ReadAhead(uint64_t count = 0) : count_(count) {}
  // A read of chunks [first, last], all of them there already or not; the
  // chunks to fetch ahead of it, [first, last], if any. A read of what is
  // there (the tables, a file fetched whole) starts no stream; a miss
  // elsewhere starts one in place of the stream read longest ago.
  std::optional<std::pair<uint64_t, uint64_t>> read(uint64_t first, uint64_t last, bool there);

private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  struct Stream {
    uint64_t end = kNone;     // its last chunk read
    uint64_t run = 0;         // how many chunks it has gone in order
    uint64_t wanted = kNone;  // the last chunk wanted ahead of it
    uint64_t used = 0;        // when it was last read (tick_)
  };
  uint64_t count_;
  std::array<Stream, 4> streams_{};
  uint64_t tick_ = 0;
};

// Reads that have asked for a tenth of a file's chunks (and at least
// kMin), misses and read-ahead counted, read it whole (tar, a copy, a
// checksum): then the rest is fetched in file order, from past the last
// chunk asked for round to where it began, after what the reads want.
// A program's own reads (a Python start: some 5 % of a large image) stay
// below. Not thread-safe (LazySource holds its lock).
class Scan {
public:
  static constexpr uint64_t kShare = 10;
  static constexpr uint64_t kMin = 64;

  explicit Scan(uint64_t count = 0) : count_(count) {}
  // Chunks [first, last] asked for; true when this starts the scan.
  bool asked(uint64_t first, uint64_t last);
  bool left() const { return started_ && seen_ < count_; }
  // The scan's next run of at most `most` chunks that `settled` (there, or
  // on their way) leaves out; none once it has gone round.
  std::optional<std::pair<uint64_t, uint64_t>> next(const std::function<bool(uint64_t)>& settled, uint64_t most);

private:
  uint64_t count_;
  uint64_t asked_ = 0;  // a chunk asked for twice counts twice
  bool started_ = false;
  uint64_t next_ = 0;  // where it goes on
  uint64_t seen_ = 0;  // chunks passed, up to count_
};

// The reader's side of a node cache entry (the directory `dir`): chunks
// it lacks are asked of a fetcher, started on the first miss, which
// writes them into the file and answers; chunks already there cost a look
// at `have`. Thread-safe: reads that miss at once go to fetchers of their
// own (up to kFetchers, each with its connection), so that one slow
// request does not hold up the others. Holds a shared lock on `have` while
// it lives, so that the cache's eviction passes the entry by.
class LazySource final : public Source {
public:
  explicit LazySource(const std::string& dir);
  ~LazySource() override;
  bool need(uint64_t offset, uint64_t length, std::string* why) override;
  // Fetched in the background by up to kWanters threads, in requests of
  // at most kMaxAhead + 1 chunks (a file read whole: kMaxScanPiece bytes);
  // a read of a chunk in flight waits for it instead of asking again. One
  // fetcher stays free for reads.
  void want(uint64_t offset, uint64_t length) override;
  bool has(uint64_t offset, uint64_t length) const override;
  // Starts the first kReady fetchers, which connect while nothing is
  // asked: the first misses do not wait for a process, a TLS handshake and
  // the registry's authentication.
  void serving() override;

  static constexpr size_t kFetchers = 4;
  static constexpr size_t kWanters = kFetchers - 1;
  // Fetchers started by serving(): the first file's reads and its whole
  // file wanted come at once.
  static constexpr size_t kReady = 2;
  // The most chunks of one request for what reads want ahead (a file
  // read from its start, an ordered stream's window).
  static constexpr uint64_t kMaxAhead = 31;
  // The most bytes of one request of a file read whole (chunks are kept
  // as they come: a read waits for its own, not for the request's end).
  static constexpr uint64_t kMaxScanPiece = 64 << 20;

private:
  struct Fetcher {
    pid_t pid = -1;
    int fd = -1;           // its stdin and stdout, a socket
    std::string pending;   // what was read past a reply
    bool busy = false;
  };
  bool present(uint64_t first, uint64_t last) const;
  // The chunks [first, last] that hold bytes [offset, offset + length)
  // (length > 0); nullopt where those lie past the file.
  std::optional<std::pair<uint64_t, uint64_t>> chunks(uint64_t offset, uint64_t length) const;
  // Chunks [first, last] there, fetched by this thread or another.
  bool fetch(uint64_t first, uint64_t last, std::string* why);
  // Chunks [first, last] to the wanters.
  void want_chunks(uint64_t first, uint64_t last);
  void want_loop();
  // What the reads asked for, counted by scan_ (which may start).
  void asked(uint64_t first, uint64_t last);
  bool start(Fetcher& f, std::string* why);
  bool ask(Fetcher& f, uint64_t first, uint64_t last, std::string* why);
  std::string dir_;
  uint64_t chunk_size_ = 0, size_ = 0, count_ = 0;
  int have_fd_ = -1;
  const unsigned char* have_ = nullptr;  // shared mapping of `have`
  std::mutex mu_;
  std::condition_variable idle_;  // a fetcher is free again, or a chunk came
  ReadAhead ahead_;  // the reads in order, and what to fetch ahead of them
  std::vector<Fetcher> fetchers_ = std::vector<Fetcher>(kFetchers);
  std::vector<unsigned char> in_flight_;              // a byte a chunk: asked for
  std::deque<std::pair<uint64_t, uint64_t>> wanted_;  // chunk ranges to fetch
  std::condition_variable wanted_cv_;
  std::vector<std::thread> wanters_;
  bool stopping_ = false;
  const bool background_ = lazy::background_wanted();
  Scan scan_;
};

}  // namespace rt::squash

// Tar streams through libarchive (see tar_filter.hpp).
#include "image/tar_filter.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <memory>

#include "rt/error.hpp"

namespace rt::image {
namespace {

class Filter {
public:
  Filter(ReadFn in, std::vector<std::string> drop, AttrMap attrs)
      : in_(std::move(in)),
        drop_(std::move(drop)),
        attrs_(std::move(attrs)),
        r_(archive_read_new(), archive_read_free),
        w_(archive_write_new(), archive_write_free) {
    archive_read_support_format_tar(r_.get());
    if (archive_read_open(r_.get(), this, nullptr, on_read, nullptr) != ARCHIVE_OK) failed(r_.get());
    archive_write_set_format_pax_restricted(w_.get());
    archive_write_set_format_option(w_.get(), "pax", "hdrcharset", "BINARY");  // names are bytes, as read
    archive_write_set_bytes_in_last_block(w_.get(), 1);
    if (archive_write_open(w_.get(), this, nullptr, on_write, nullptr) != ARCHIVE_OK) failed(w_.get());
  }

  size_t read(void* buf, size_t size) {
    while (at_ == out_.size() && !done_) step();
    const size_t n = std::min(size, out_.size() - at_);
    std::memcpy(buf, out_.data() + at_, n);
    at_ += n;
    if (at_ == out_.size()) {
      out_.clear();
      at_ = 0;
    }
    return n;
  }

private:
  static la_ssize_t on_read(archive*, void* self, const void** buf) {
    auto* f = static_cast<Filter*>(self);
    *buf = f->inbuf_;
    return static_cast<la_ssize_t>(f->in_(f->inbuf_, sizeof f->inbuf_));
  }
  static la_ssize_t on_write(archive*, void* self, const void* buf, size_t n) {
    static_cast<Filter*>(self)->out_.append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  }
  [[noreturn]] static void failed(archive* a) {
    throw Error(std::string("tar stream: ") + (archive_error_string(a) ? archive_error_string(a) : "unreadable"));
  }

  bool dropped(std::string name) const {
    if (name.starts_with("./")) name.erase(0, 2);
    for (const auto& d : drop_)
      if (name == d || name == d + "/" || name.starts_with(d + "/")) return true;
    return false;
  }

  // One entry through (or not), or the end.
  void step() {
    if (entry_open_) {  // the entry's data, a piece at a time
      const la_ssize_t n = archive_read_data(r_.get(), chunk_, sizeof chunk_);
      if (n < 0) failed(r_.get());
      if (n == 0) {
        entry_open_ = false;
        return;
      }
      if (keep_ && archive_write_data(w_.get(), chunk_, static_cast<size_t>(n)) != n) failed(w_.get());
      return;
    }
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(r_.get(), &e);
    if (rc == ARCHIVE_EOF) {
      if (archive_write_close(w_.get()) != ARCHIVE_OK) failed(w_.get());
      done_ = true;
      return;
    }
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) failed(r_.get());
    const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    keep_ = !dropped(name);
    if (keep_ && !attrs_.empty() && archive_entry_filetype(e) != AE_IFLNK && !archive_entry_hardlink(e))
      if (auto a = attrs_.find(attr_key(name)); a != attrs_.end()) add_attrs(e, a->second);
    if (keep_ && archive_write_header(w_.get(), e) != ARCHIVE_OK) failed(w_.get());
    entry_open_ = true;
  }

  ReadFn in_;
  std::vector<std::string> drop_;
  AttrMap attrs_;
  std::unique_ptr<archive, int (*)(archive*)> r_, w_;
  char inbuf_[1 << 16];
  char chunk_[1 << 16];
  std::string out_;
  size_t at_ = 0;
  bool entry_open_ = false, keep_ = false, done_ = false;
};

class Raw {
public:
  Raw(ReadFn in, std::string name)
      : in_(std::move(in)), name_(std::move(name)), r_(archive_read_new(), archive_read_free) {
    archive_read_support_filter_all(r_.get());
    archive_read_support_format_raw(r_.get());
    archive_entry* e = nullptr;
    if (archive_read_open(r_.get(), this, nullptr, on_read, nullptr) != ARCHIVE_OK ||
        archive_read_next_header(r_.get(), &e) != ARCHIVE_OK)
      failed();
  }
  size_t read(void* buf, size_t size) {
    const la_ssize_t n = archive_read_data(r_.get(), buf, size);
    if (n < 0) failed();
    return static_cast<size_t>(n);
  }

private:
  static la_ssize_t on_read(archive*, void* self, const void** buf) {
    auto* r = static_cast<Raw*>(self);
    *buf = r->inbuf_;
    return static_cast<la_ssize_t>(r->in_(r->inbuf_, sizeof r->inbuf_));
  }
  [[noreturn]] void failed() {
    const char* why = archive_error_string(r_.get());
    throw Error("`" + name_ + "`: " + (why ? why : "cannot be decompressed") + ": corrupt or truncated?");
  }
  ReadFn in_;
  std::string name_;
  std::unique_ptr<archive, int (*)(archive*)> r_;
  char inbuf_[1 << 16];
};

}  // namespace

ReadFn decompressed(ReadFn in, std::string name) {
  auto r = std::make_shared<Raw>(std::move(in), std::move(name));
  return [r](void* buf, size_t size) { return r->read(buf, size); };
}

ReadFn without_names(ReadFn in, std::vector<std::string> drop) { return filtered(std::move(in), std::move(drop), {}); }

ReadFn filtered(ReadFn in, std::vector<std::string> drop, AttrMap attrs) {
  auto f = std::make_shared<Filter>(std::move(in), std::move(drop), std::move(attrs));
  return [f](void* buf, size_t size) { return f->read(buf, size); };
}

}  // namespace rt::image

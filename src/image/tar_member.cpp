// Members of a tar file (host).
#include "image/tar_member.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "image/unpack.hpp"
#include "rt/error.hpp"

namespace rt::image {
namespace {

struct Closer {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, Closer>;

std::string clean(const char* name) {
  std::string n = name ? name : "";
  while (n.starts_with("./")) n.erase(0, 2);
  return n;
}

ArchivePtr open_tar(const std::string& tar) {
  ArchivePtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), tar.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error("`" + tar + "` is not a tar archive (docker-archive, OCI archive or root filesystem tar): " +
                archive_error(a.get()));
  return a;
}

// Positions `a` at `member`; false when the archive ends first.
bool seek_member(archive* a, const std::string& tar, const std::string& member) {
  archive_entry* e;
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) return false;
    if (r < ARCHIVE_WARN) throw Error("`" + tar + "` is not a valid tar archive: " + archive_error(a));
    if (clean(archive_entry_pathname(e)) == member && archive_entry_filetype(e) == AE_IFREG) return true;
  }
}

}  // namespace

std::vector<std::string> tar_members(const std::string& tar) {
  ArchivePtr a = open_tar(tar);
  std::vector<std::string> out;
  archive_entry* e;
  for (;;) {
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) throw Error("`" + tar + "` is not a valid tar archive: " + archive_error(a.get()));
    if (archive_entry_filetype(e) == AE_IFREG) out.push_back(clean(archive_entry_pathname(e)));
  }
  return out;
}

std::optional<std::string> tar_read_small(const std::string& tar, const std::string& member, size_t limit) {
  ArchivePtr a = open_tar(tar);
  if (!seek_member(a.get(), tar, member)) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
    if (n < 0) throw Error("`" + tar + "` member `" + member + "`: " + archive_error(a.get()));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit)
      throw Error("`" + tar + "` member `" + member + "` is larger than " + std::to_string(limit) + " bytes");
  }
  return out;
}

ReadFn tar_member_reader(const std::string& tar, const std::string& member) {
  auto a = std::make_shared<ArchivePtr>(open_tar(tar));
  if (!seek_member(a->get(), tar, member)) throw Error("`" + tar + "` has no member `" + member + "`");
  return [a, tar, member](void* buf, size_t size) -> size_t {
    la_ssize_t n = archive_read_data(a->get(), buf, size);
    if (n < 0) throw Error("`" + tar + "` member `" + member + "`: " + archive_error(a->get()));
    return static_cast<size_t>(n);
  };
}

}  // namespace rt::image

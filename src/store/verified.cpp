// The store's record of files checked once (host); see verified.hpp.
#include "store/verified.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "store/layout.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::store {

std::string file_identity(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

bool is_verified(const Root& root, std::string_view identity) {
  util::UniqueFd d = root.dir(kVerifiedDir, false);
  if (!d) return false;
  struct stat st;
  const std::string name = util::keyed_hash_hex(root.secret(), identity);
  return ::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         st.st_uid == ::getuid();
}

void remember_verified(const Root& root, std::string_view identity, std::string_view note) {
  util::UniqueFd d = root.dir(kVerifiedDir, true);
  util::write_file_atomic_at(d.get(), util::keyed_hash_hex(root.secret(), identity), note);
}

}  // namespace rt::store

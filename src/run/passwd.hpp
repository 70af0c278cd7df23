// Synthesized /etc/passwd and /etc/group for the container (pure).
#pragma once
#include <sys/types.h>

#include <string>

namespace rt::run {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;
  std::string group;
  std::string home;
  std::string shell;
};

// The image's file (may be empty) with every entry that clashes with the
// caller (same name or same id) removed, then the caller's entry appended.
std::string synth_passwd(const std::string& image_passwd, const Identity& id);
std::string synth_group(const std::string& image_group, const Identity& id);

}  // namespace rt::run

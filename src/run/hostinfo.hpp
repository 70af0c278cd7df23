// Facts about the caller gathered on the host before anything changes.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace rt::run {

struct HostInfo {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;              // $USER, else /etc/passwd, else "user<uid>"
  std::string home;              // $HOME, else /etc/passwd; may be empty
  std::string shell;             // $SHELL; may be empty
  std::string group;             // name of gid from /etc/group, else the user name
  std::string cwd;               // getcwd(); empty when it cannot be determined
  std::vector<std::string> env;  // the caller's environment, "K=V"
};

// Never consults NSS (LDAP, sssd): a job's thousand ranks must not hammer a
// directory server, and the variables the launcher passed are the truth the
// user sees anyway.
HostInfo gather_host_info();

// Looks up field values in passwd(5)/group(5) text (pure, for tests).
// Returns the line's fields for the first line whose field 2 (the id) is id.
std::vector<std::string> find_id_line(const std::string& text, unsigned long id);

}  // namespace rt::run

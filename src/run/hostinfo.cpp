// Facts about the caller (host).
#include "run/hostinfo.hpp"

#include <unistd.h>

#include <cstdlib>

#include "util/fs.hpp"
#include "util/strings.hpp"

extern char** environ;

namespace rt::run {

std::vector<std::string> find_id_line(const std::string& text, unsigned long id) {
  // Runs on every start: find the line by its third field before splitting anything.
  const std::string want = std::to_string(id);
  std::vector<std::string> found;
  util::for_each_line(text, [&](std::string_view line) {
    if (line.empty() || line.front() == '#') return true;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return true;
    size_t c3 = line.find(':', c2 + 1);
    std::string_view field = line.substr(c2 + 1, c3 == std::string_view::npos ? std::string_view::npos : c3 - c2 - 1);
    if (field != want) return true;
    found = util::split(line, ':');
    return false;
  });
  return found;
}

HostInfo gather_host_info() {
  HostInfo h;
  h.uid = ::getuid();
  h.gid = ::getgid();
  for (char** e = environ; e && *e; ++e) h.env.emplace_back(*e);
  auto env = [](const char* k) -> std::string {
    const char* v = std::getenv(k);
    return v ? v : "";
  };
  h.user = env("USER");
  if (h.user.empty()) h.user = env("LOGNAME");
  h.home = env("HOME");
  h.shell = env("SHELL");
  if (h.user.empty() || h.home.empty()) {
    if (auto text = util::read_file_if_exists("/etc/passwd")) {
      auto f = find_id_line(*text, h.uid);
      if (f.size() >= 6) {
        if (h.user.empty()) h.user = f[0];
        if (h.home.empty()) h.home = f[5];
      }
    }
  }
  if (h.user.empty()) h.user = "user" + std::to_string(h.uid);
  if (auto text = util::read_file_if_exists("/etc/group")) {
    auto f = find_id_line(*text, h.gid);
    if (!f.empty()) h.group = f[0];
  }
  if (h.group.empty()) h.group = h.user;
  char buf[4096];
  if (::getcwd(buf, sizeof buf)) h.cwd = buf;
  return h;
}

}  // namespace rt::run

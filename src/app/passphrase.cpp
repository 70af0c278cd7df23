// A signing key's passphrase (host); see passphrase.hpp.
#include "app/passphrase.hpp"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>

#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

namespace rt::app {

std::string sign_passphrase(const std::string& key, const std::string& file) {
  if (!file.empty()) {
    // Its first line, as skopeo reads --sign-passphrase-file (a trailing
    // CR of a file written on another system dropped too).
    util::UniqueFd fd = util::open_fd(file, O_RDONLY | O_CLOEXEC);
    std::string text = util::read_regular_fd(fd.get(), file, 64 << 10);
    if (const size_t nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    return text;
  }
  if (const char* p = std::getenv("RT_SIGN_PASSPHRASE")) return p;
  util::UniqueFd tty;
  try {
    tty = util::open_fd("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  } catch (const SysError&) {
    throw Error("key " + key + " is protected by a passphrase and there is no terminal to ask it on: set "
                "RT_SIGN_PASSPHRASE");
  }
  struct termios old{};
  const bool term = ::tcgetattr(tty.get(), &old) == 0;
  if (term) {
    struct termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(tty.get(), TCSAFLUSH, &quiet);
  }
  const std::string prompt = "Passphrase for key " + key + ": ";
  util::write_all(tty.get(), prompt, "/dev/tty");
  std::string pw;
  char c;
  while (::read(tty.get(), &c, 1) == 1 && c != '\n') pw += c;
  if (term) ::tcsetattr(tty.get(), TCSAFLUSH, &old);
  util::write_all(tty.get(), "\n", "/dev/tty");
  return pw;
}

std::function<std::string(const std::string&)> passphrase_from(const std::string& file) {
  return [file](const std::string& key) { return sign_passphrase(key, file); };
}

}  // namespace rt::app

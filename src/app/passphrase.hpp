// A signing key's passphrase (host), asked once by GnuPG's callback
// (image/openpgp): for rt sign and rt push --sign-by alike.
#pragma once
#include <functional>
#include <string>

namespace rt::app {

// The passphrase of `key`: the first line of `file` when one is given
// (skopeo's --sign-passphrase-file), else $RT_SIGN_PASSPHRASE, else asked
// on the terminal (/dev/tty, echo off), else refused.
std::string sign_passphrase(const std::string& key, const std::string& file);

// sign_passphrase for `file`, as the callback OpenPgp takes.
std::function<std::string(const std::string&)> passphrase_from(const std::string& file);

}  // namespace rt::app

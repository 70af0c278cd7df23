// Which SIF images must verify before they run, and the store's record of
// those that did (host); see rt/exec.hpp. rt verify itself is rt-image's
// (GPGME): the command line runs it between the two calls here.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "squash/sif.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"
#include "store/verified.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt {

std::optional<SifVerification> sif_verification_needed(const ExecOptions& o) {
  // Cheapest first: most starts ask no verification (one failed open of
  // the site configuration).
  SifVerification v;
  v.keys = o.verify_keys;
  const bool asked = !v.keys.empty();
  if (!asked) {
    v.keys = hpc::load_site_config().get("sif.keys");
    if (v.keys.empty()) return std::nullopt;
    v.from_site = true;
  }
  auto not_sif = [&]() -> std::optional<SifVerification> {
    if (asked) throw Error("--verify-key: `" + o.image + "` is not a SIF file", "only SIF files carry signatures: name the file");
    return std::nullopt;
  };
  if (store::name_kind(o.image) != store::NameKind::Path) return not_sif();
  util::UniqueFd fd(::open(o.image.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !squash::is_sif(fd.get())) return not_sif();
  // Checked, then opened again to run: a file another user could change
  // between the two is refused, not verified.
  if (std::string why = store::foreign_path(o.image); !why.empty())
    throw Error("`" + o.image + "` cannot be verified before it runs: " + why,
                "copy it where only you can write, then run the copy");
  v.file = o.image;
  // The record's name: the file as it is now and the keys' contents.
  std::string id = store::file_identity(st);
  for (const auto& k : v.keys) {
    auto text = util::read_regular_if_exists(k, 1 << 20);
    if (!text) throw Error("verification key `" + k + "` does not exist" + (v.from_site ? " (the site's sif.keys)" : ""));
    id += "\n" + *text;
  }
  v.storage = o.storage;
  v.identity = std::move(id);
  if (const store::Root* root = store::Root::user_if_exists(o.storage); root && store::is_verified(*root, v.identity))
    return std::nullopt;
  return v;
}

void remember_sif_verified(const SifVerification& v) {
  store::remember_verified(store::Root::user(v.storage), v.identity, v.file + "\n" + util::join(v.keys, "\n") + "\n");
}

}  // namespace rt

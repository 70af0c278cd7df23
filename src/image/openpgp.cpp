// OpenPGP through GPGME in a private GnuPG home (host); see openpgp.hpp.
#include "image/openpgp.hpp"

#include <fcntl.h>
#include <gpgme.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "image/child.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/fd.hpp"

namespace rt::image {
namespace {

gpgme_ctx_t as_ctx(void* p) { return static_cast<gpgme_ctx_t>(p); }

std::string why(gpgme_error_t e) { return gpgme_strerror(e); }

// Owned GPGME data buffers.
struct Data {
  gpgme_data_t d = nullptr;
  Data() = default;
  Data(Data&& o) noexcept : d(std::exchange(o.d, nullptr)) {}
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  ~Data() {
    if (d) gpgme_data_release(d);
  }
  // The bytes written into it, taken out (the buffer is released).
  std::string take() {
    size_t n = 0;
    char* p = gpgme_data_release_and_get_mem(d, &n);
    d = nullptr;
    std::string s(p ? p : "", p ? n : 0);
    gpgme_free(p);
    return s;
  }
};

Data memory(std::string_view bytes) {
  Data data;
  if (gpgme_error_t e = gpgme_data_new_from_mem(&data.d, bytes.data(), bytes.size(), 1))
    throw Error("GPGME: cannot hold data: " + why(e));
  return data;
}

Data empty() {
  Data data;
  if (gpgme_error_t e = gpgme_data_new(&data.d)) throw Error("GPGME: cannot hold data: " + why(e));
  return data;
}

struct KeyRef {
  gpgme_key_t k = nullptr;
  KeyRef() = default;
  KeyRef(const KeyRef&) = delete;
  KeyRef& operator=(const KeyRef&) = delete;
  ~KeyRef() {
    if (k) gpgme_key_unref(k);
  }
};

// SHA-2 only: the hashes pkg/integrity accepts (clearsign.go: SHA-224,
// -256, -384, -512; not SHA-1 or MD5).
bool strong_hash(gpgme_hash_algo_t h) {
  return h == GPGME_MD_SHA224 || h == GPGME_MD_SHA256 || h == GPGME_MD_SHA384 || h == GPGME_MD_SHA512;
}

std::string temp_parent() {
  const char* t = std::getenv("TMPDIR");
  return t && *t == '/' ? t : "/tmp";
}

struct Passphrase {
  const std::function<std::string(const std::string&)>* ask = nullptr;
  std::string key;
  bool asked = false;
  std::string error;  // what `ask` threw
};

gpgme_error_t passphrase_cb(void* hook, const char*, const char*, int prev_was_bad, int fd) {
  auto* p = static_cast<Passphrase*>(hook);
  if (prev_was_bad || p->asked) return gpg_error(GPG_ERR_BAD_PASSPHRASE);  // one try: no loop on a wrong one
  p->asked = true;
  std::string pw;
  try {
    pw = (*p->ask)(p->key);
  } catch (const std::exception& e) {
    p->error = e.what();
    return gpg_error(GPG_ERR_CANCELED);
  }
  pw += '\n';
  const bool ok = gpgme_io_writen(fd, pw.data(), pw.size()) == 0;
  std::memset(pw.data(), 0, pw.size());
  return ok ? 0 : gpg_error(GPG_ERR_EIO);
}

}  // namespace

OpenPgp::OpenPgp() {
  static std::once_flag once;
  std::call_once(once, [] { gpgme_check_version(nullptr); });
  if (gpgme_error_t e = gpgme_engine_check_version(GPGME_PROTOCOL_OpenPGP))
    throw Error("GnuPG (gpg) is not usable here: " + why(e), "install it (Debian: apt install gpg)");
  std::string tmpl = temp_parent() + "/rt-gnupg.XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw SysError{errno, "mkdtemp", tmpl};
  home_ = tmpl;
  try {
    // SHA-256 signatures whatever the key prefers; no key servers, no
    // smart cards, nothing looked up outside the home.
    for (const auto& [name, text] :
         {std::pair<const char*, const char*>{"gpg.conf", "digest-algo SHA256\nno-auto-key-retrieve\nno-greeting\n"},
          {"gpg-agent.conf", "disable-scdaemon\nallow-loopback-pinentry\n"}}) {
      const std::string path = home_ + "/" + name;
      util::UniqueFd fd = util::open_fd(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      util::write_all(fd.get(), text, path);
    }
    gpgme_ctx_t ctx = nullptr;
    if (gpgme_error_t e = gpgme_new(&ctx)) throw Error("GPGME: " + why(e));
    ctx_ = ctx;
    gpgme_set_protocol(ctx, GPGME_PROTOCOL_OpenPGP);
    if (gpgme_error_t e = gpgme_ctx_set_engine_info(ctx, GPGME_PROTOCOL_OpenPGP, nullptr, home_.c_str()))
      throw Error("GPGME: cannot use the GnuPG home `" + home_ + "`: " + why(e));
    gpgme_set_offline(ctx, 1);
  } catch (...) {
    if (ctx_) gpgme_release(as_ctx(ctx_));
    util::remove_tree(home_);
    throw;
  }
}

OpenPgp::OpenPgp(const UserHome& home) : home_(home.dir), own_(false) {
  static std::once_flag once;
  std::call_once(once, [] { gpgme_check_version(nullptr); });
  if (gpgme_error_t e = gpgme_engine_check_version(GPGME_PROTOCOL_OpenPGP))
    throw Error("GnuPG (gpg) is not usable here: " + why(e), "install it (Debian: apt install gpg)");
  // The user's keyring is used where it is, through the user's own
  // gpg-agent: a secret key exported into a private home would be a copy of
  // it on disk (and its export asks the passphrase once more), while the
  // agent signs without the key leaving the keyring, as skopeo --sign-by
  // and gpg --sign do.
  if (!home_.empty() && !util::is_directory(home_)) throw Error("GnuPG home `" + home_ + "` is not a directory");
  gpgme_ctx_t ctx = nullptr;
  if (gpgme_error_t e = gpgme_new(&ctx)) throw Error("GPGME: " + why(e));
  ctx_ = ctx;
  gpgme_set_protocol(ctx, GPGME_PROTOCOL_OpenPGP);
  if (gpgme_error_t e =
          gpgme_ctx_set_engine_info(ctx, GPGME_PROTOCOL_OpenPGP, nullptr, home_.empty() ? nullptr : home_.c_str())) {
    gpgme_release(ctx);
    ctx_ = nullptr;
    throw Error("GPGME: cannot use the GnuPG home " + where() + ": " + why(e));
  }
  gpgme_set_offline(ctx, 1);
}

std::string OpenPgp::where() const {
  if (!home_.empty()) return "`" + home_ + "`";
  const char* g = std::getenv("GNUPGHOME");
  if (g && *g) return "`" + std::string(g) + "`";
  const char* h = std::getenv("HOME");
  return h && *h ? "`" + std::string(h) + "/.gnupg`" : "~/.gnupg";
}

OpenPgp::~OpenPgp() {
  if (ctx_) gpgme_release(as_ctx(ctx_));
  if (!own_) return;  // the user's home and agent stay as they were
  if (agent_) {
    // The agent gpg started for this home, and its socket directory (under
    // /run/user/UID when that exists); quietly: it may have ended already.
    try {
      util::UniqueFd null = util::open_fd("/dev/null", O_RDWR | O_CLOEXEC);
      run_program({"gpgconf", "--homedir", home_, "--kill", "all"}, {null.get(), null.get(), null.get()});
      run_program({"gpgconf", "--homedir", home_, "--remove-socketdir"}, {null.get(), null.get(), null.get()});
    } catch (const std::exception&) {
    }
  }
  try {
    util::remove_tree(home_);
  } catch (const std::exception&) {
  }
}

std::vector<std::string> OpenPgp::import_file(const std::string& path) {
  util::UniqueFd fd = util::open_fd(path, O_RDONLY | O_CLOEXEC);
  return import_data(util::read_regular_fd(fd.get(), path, 16 << 20), "key file `" + path + "`");
}

std::vector<std::string> OpenPgp::import_data(std::string_view bytes, const std::string& what) {
  Data data = memory(bytes);
  // A secret key may be imported before signing (its passphrase is asked
  // for then, not here).
  gpgme_set_pinentry_mode(as_ctx(ctx_), GPGME_PINENTRY_MODE_LOOPBACK);
  agent_ = true;  // gpg may start one to list what it imported
  if (gpgme_error_t e = gpgme_op_import(as_ctx(ctx_), data.d))
    throw Error(what + ": GnuPG cannot import it: " + why(e));
  gpgme_import_result_t r = gpgme_op_import_result(as_ctx(ctx_));
  std::vector<std::string> out;
  for (gpgme_import_status_t s = r ? r->imports : nullptr; s; s = s->next)
    if (s->result == 0 && s->fpr) {
      std::string fpr = s->fpr;
      if (std::find(out.begin(), out.end(), fpr) == out.end()) out.push_back(fpr);
    }
  if (out.empty())
    throw Error(what + " holds no OpenPGP key GnuPG could import",
                "give an ASCII-armoured or binary key (gpg --export --armor KEYID > FILE)");
  return out;
}

std::vector<std::string> OpenPgp::import_home(const std::string& dir) {
  if (!util::is_directory(dir)) throw Error("GnuPG home `" + dir + "` is not a directory");
  std::string exported;
  {
    gpgme_ctx_t other = nullptr;
    if (gpgme_error_t e = gpgme_new(&other)) throw Error("GPGME: " + why(e));
    gpgme_set_protocol(other, GPGME_PROTOCOL_OpenPGP);
    gpgme_set_offline(other, 1);
    Data out = empty();
    gpgme_error_t e = gpgme_ctx_set_engine_info(other, GPGME_PROTOCOL_OpenPGP, nullptr, dir.c_str());
    if (!e) e = gpgme_op_export(other, nullptr, 0, out.d);
    gpgme_release(other);
    if (e) throw Error("GnuPG home `" + dir + "`: cannot export its public keys: " + why(e));
    exported = out.take();
  }
  if (exported.empty()) throw Error("GnuPG home `" + dir + "` holds no public keys");
  Data data = memory(exported);
  if (gpgme_error_t e = gpgme_op_import(as_ctx(ctx_), data.d))
    throw Error("GnuPG home `" + dir + "`: cannot import its keys: " + why(e));
  std::vector<std::string> out;
  gpgme_import_result_t r = gpgme_op_import_result(as_ctx(ctx_));
  for (gpgme_import_status_t s = r ? r->imports : nullptr; s; s = s->next)
    if (s->result == 0 && s->fpr) out.push_back(s->fpr);
  return out;
}

OpenPgp::Verified OpenPgp::verify_clearsigned(std::string_view message) {
  Verified v;
  // One clear-signed message and nothing else: text outside it would be
  // shown by some readers but signed by nobody.
  constexpr std::string_view kBegin = "-----BEGIN PGP SIGNED MESSAGE-----", kEnd = "-----END PGP SIGNATURE-----";
  std::string_view m = message;
  while (!m.empty() && (m.back() == '\n' || m.back() == '\r' || m.back() == '\0' || m.back() == ' ')) m.remove_suffix(1);
  if (!m.starts_with(kBegin) || !m.ends_with(kEnd) || m.find(kBegin, 1) != std::string_view::npos ||
      m.find(kEnd) != m.size() - kEnd.size()) {
    v.problem = "not one OpenPGP clear-signed message";
    return v;
  }
  return verify_message(m);
}

OpenPgp::Verified OpenPgp::verify_signed_message(std::string_view message) {
  // A clear-signed or detached signature carries no payload of its own:
  // only a signed message is one (containers-signature(5)).
  if (message.find("-----BEGIN PGP SIGNED MESSAGE-----") != std::string_view::npos) {
    Verified v;
    v.problem = "a clear-signed message, not an OpenPGP signed message";
    return v;
  }
  return verify_message(message);
}

OpenPgp::Verified OpenPgp::verify_message(std::string_view m) {
  Verified v;
  Data sig = memory(m);
  Data plain = empty();
  if (gpgme_error_t e = gpgme_op_verify(as_ctx(ctx_), sig.d, nullptr, plain.d)) {
    v.problem = "GnuPG cannot read it: " + why(e);
    return v;
  }
  gpgme_verify_result_t r = gpgme_op_verify_result(as_ctx(ctx_));
  gpgme_signature_t s = r ? r->signatures : nullptr;
  if (!s || s->next) {
    v.problem = s ? "it carries more than one OpenPGP signature" : "it carries no OpenPGP signature";
    return v;
  }
  v.fingerprint = s->fpr ? s->fpr : "";
  switch (gpg_err_code(s->status)) {
  case GPG_ERR_NO_ERROR:
    break;
  case GPG_ERR_NO_PUBKEY:
    v.problem = "signed by a key not given (" + v.fingerprint + ")";
    return v;
  case GPG_ERR_BAD_SIGNATURE:
    v.problem = "bad signature (the signed text or the signature was changed)";
    return v;
  default:
    v.problem = "signature not valid: " + why(s->status);
    return v;
  }
  if (!strong_hash(s->hash_algo)) {
    const char* h = gpgme_hash_algo_name(s->hash_algo);
    v.problem = std::string("the signature hashes with ") + (h ? h : "an unknown algorithm") + ", not SHA-2";
    return v;
  }
  // The primary key's fingerprint: a subkey may have signed, and SIF
  // descriptors record the primary key (pkg/integrity: PrimaryKey.Fingerprint).
  KeyRef key;
  if (gpgme_get_key(as_ctx(ctx_), v.fingerprint.c_str(), &key.k, 0) == 0 && key.k && key.k->subkeys &&
      key.k->subkeys->fpr)
    v.fingerprint = key.k->subkeys->fpr;
  v.text = plain.take();
  v.good = true;
  return v;
}

std::string OpenPgp::secret_key(const std::string& id) {
  gpgme_ctx_t ctx = as_ctx(ctx_);
  std::vector<std::string> found;
  gpgme_error_t e = gpgme_op_keylist_start(ctx, id.empty() ? nullptr : id.c_str(), 1);
  while (!e) {
    KeyRef key;
    e = gpgme_op_keylist_next(ctx, &key.k);
    if (e) break;
    if (key.k->subkeys && key.k->subkeys->fpr && key.k->can_sign && !key.k->revoked && !key.k->expired &&
        !key.k->disabled && !key.k->invalid)
      found.push_back(key.k->subkeys->fpr);
  }
  gpgme_op_keylist_end(ctx);
  if (gpg_err_code(e) != GPG_ERR_EOF && gpg_err_code(e) != GPG_ERR_NO_ERROR)
    throw Error("GnuPG home " + where() + ": cannot list its secret keys: " + why(e));
  if (found.empty())
    throw Error((id.empty() ? "no usable secret key" : "no usable secret key `" + id + "`") +
                    " to sign with in the GnuPG home " + where(),
                "list them with gpg --list-secret-keys; give one by its fingerprint");
  if (found.size() > 1) {
    std::string all;
    for (const auto& f : found) all += " " + f;
    throw Error((id.empty() ? "there are " : "`" + id + "` names ") + std::to_string(found.size()) +
                    " secret keys in the GnuPG home " + where() +
                    ":" + all,
                "give one by its fingerprint");
  }
  return found.front();
}

std::string OpenPgp::clearsign(std::string_view text, const std::string& fingerprint,
                               const std::function<std::string(const std::string&)>& passphrase) {
  return sign(text, fingerprint, passphrase, true);
}

std::string OpenPgp::sign_message(std::string_view text, const std::string& fingerprint,
                                  const std::function<std::string(const std::string&)>& passphrase) {
  std::string message = sign(text, fingerprint, passphrase, false);
  // Checked as a verifier will, as containers/image checks a signature it
  // just made: the payload and the key are the ones meant.
  Verified v = verify_signed_message(message);
  if (!v.good) throw Error("the signature made by key " + fingerprint + " does not verify: " + v.problem);
  if (v.text != text) throw Error("the signature made by key " + fingerprint + " holds another payload");
  return message;
}

std::string OpenPgp::sign(std::string_view text, const std::string& fingerprint,
                          const std::function<std::string(const std::string&)>& passphrase, bool clear) {
  gpgme_ctx_t ctx = as_ctx(ctx_);
  KeyRef key;
  if (gpgme_error_t e = gpgme_get_key(ctx, fingerprint.c_str(), &key.k, 1))
    throw Error("no secret key " + fingerprint + " to sign with in the GnuPG home " + where() + ": " + why(e));
  gpgme_signers_clear(ctx);
  if (gpgme_error_t e = gpgme_signers_add(ctx, key.k)) throw Error("GPGME: cannot sign with " + fingerprint + ": " + why(e));
  Passphrase p;
  p.ask = &passphrase;
  p.key = fingerprint;
  gpgme_set_pinentry_mode(ctx, GPGME_PINENTRY_MODE_LOOPBACK);
  gpgme_set_passphrase_cb(ctx, passphrase_cb, &p);
  // A clear-signed message is armoured text; a simple signature is a
  // binary signed message over the payload's exact bytes
  // (containers-signature(5)).
  gpgme_set_textmode(ctx, clear ? 1 : 0);
  gpgme_set_armor(ctx, clear ? 1 : 0);
  agent_ = true;
  Data in = memory(text);
  Data out = empty();
  const gpgme_error_t e = gpgme_op_sign(ctx, in.d, out.d, clear ? GPGME_SIG_MODE_CLEAR : GPGME_SIG_MODE_NORMAL);
  gpgme_set_passphrase_cb(ctx, nullptr, nullptr);
  if (!p.error.empty()) throw Error(p.error);
  if (e) {
    const auto code = gpg_err_code(e);
    throw Error("signing with key " + fingerprint + " failed: " +
                    (code == GPG_ERR_BAD_PASSPHRASE ? std::string("wrong passphrase") : why(e)),
                code == GPG_ERR_BAD_PASSPHRASE ? "give the key's passphrase (RT_SIGN_PASSPHRASE or the prompt)" : "");
  }
  gpgme_sign_result_t r = gpgme_op_sign_result(ctx);
  if (!r || !r->signatures || r->invalid_signers)
    throw Error("signing with key " + fingerprint + " failed: GnuPG made no signature");
  // The user's gpg.conf may prefer another hash; rt's (and pkg/integrity's)
  // verifiers take SHA-2 only.
  if (!strong_hash(r->signatures->hash_algo)) {
    const char* h = gpgme_hash_algo_name(r->signatures->hash_algo);
    throw Error("signing with key " + fingerprint + " hashed with " + (h ? h : "an unknown algorithm") + ", not SHA-2",
                "set personal-digest-preferences SHA256 in gpg.conf");
  }
  return out.take();
}

}  // namespace rt::image

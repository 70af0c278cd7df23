// An OCI distribution registry client over libcurl (host): TLS, bearer
// token and basic auth, redirects, retries with back-off, resumable blobs.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/manifest.hpp"
#include "store/ref.hpp"

namespace rt::image {

struct RegistryOptions {
  std::string ca_file;
  bool insecure = false;    // do not verify TLS certificates
  bool plain_http = false;  // http:// instead of https://
  std::string username;     // explicit credentials (else ~/.docker/config.json)
  std::string password;
};

// The options of a command that reaches a registry: its --ca-file (else
// $RT_CA_FILE), --insecure and --plain-http.
RegistryOptions registry_options(const std::string& ca_file, bool insecure, bool plain_http);

// What one blob request may take.
struct BlobLimits {
  int64_t size = -1;    // the declared size: no byte past it is written
  long timeout_ms = 0;  // for this request; 0: none
};

// What a registry request sends besides GET's nothing: its method, and a
// body from a string or a file.
struct Send {
  const char* method = nullptr;  // nullptr: GET
  const std::string* body = nullptr;
  int body_fd = -1;  // read from offset 0, again on every try
  uint64_t body_size = 0;
  std::string content_type;
  const std::function<void(uint64_t)>* progress = nullptr;  // bytes sent
  std::string range;  // "bytes=A-B": a part of what a GET names
  // A range's body handed over as it comes, instead of kept.
  struct Sink {
    const std::function<void(std::string_view)>& take;
    bool whole = false;   // the range is the whole blob: HTTP 200 will do
    uint64_t handed = 0;  // bytes given to `take`, over all tries
  };
  Sink* sink = nullptr;
};

class Registry {
public:
  Registry(store::Reference ref, RegistryOptions opts);
  ~Registry();

  // The manifest or index for `reference` (tag or digest): body and its
  // digest (checked against `reference` when that is a digest).
  struct Document {
    std::string body;
    std::string media_type;
    std::string digest;
  };
  Document get_manifest(const std::string& reference);
  // The same, nullopt where the registry has no such manifest (404).
  std::optional<Document> find_manifest(const std::string& reference);
  // A small blob (a config) into memory, verified.
  std::string get_blob(const Descriptor& d);
  // The bytes [offset, offset + length) of the blob `d` (one range
  // request), handed to `take` as they come, in order and each once (a
  // retry skips what an earlier try handed over), unverified: the caller
  // checks them, and may throw to stop the transfer (its error is then
  // this call's). Throws rt::Error naming the registry when it cannot have
  // them all, or gets other bytes than asked.
  void get_blob_range(const Descriptor& d, uint64_t offset, uint64_t length,
                      const std::function<void(std::string_view)>& take);
  // A blob into `file`, hashed while streaming and verified; resumes a
  // partial file after a dropped connection. `progress` gets byte counts.
  void download_blob(const Descriptor& d, const std::string& file, const std::function<void(uint64_t)>& progress = {});

  // Push side. Whether the repository has the blob (HEAD).
  bool has_blob(const std::string& digest);
  // Makes the blob `digest` of the repository `from` (same registry) this
  // repository's without sending it; false when the registry cannot (it
  // then gets uploaded).
  bool mount_blob(const std::string& digest, const std::string& from);
  // Uploads the file `file` as the blob `d` (POST, then one PUT; a failed
  // try is started again). `progress` gets byte counts.
  void upload_blob(const Descriptor& d, const std::string& file, const std::function<void(uint64_t)>& progress = {});
  // A small blob held in memory (a config, a signature's payload), sent
  // unless the repository has it; its descriptor, and whether it was sent.
  Descriptor put_small_blob(const std::string& data, const std::string& media_type, bool* sent = nullptr);
  // Stores `body` (of `media_type`) as the manifest `reference` (a tag);
  // returns its digest.
  std::string put_manifest(const std::string& reference, const std::string& body, const std::string& media_type);

  // Asks the registry's API root (/v2/) with the credentials, through its
  // token service when it has one; throws rt::Error when they are refused
  // or the registry cannot be reached.
  void check_credentials();

  const store::Reference& ref() const { return ref_; }
  struct Response;

private:
  Response request(const std::string& url, const std::string& accept, int out_fd, uint64_t resume_from, void* hasher,
                   const std::function<void(uint64_t)>& progress, const BlobLimits& limits = {},
                   const Send& send = Send());
  // `size`: the document's declared size, when known.
  Response request_with_retries(const std::string& url, const std::string& accept, int64_t size = -1,
                                const Send& send = Send());
  // Where an upload goes on: a Location header made absolute.
  std::string upload_url(const Response& r, const std::string& url) const;
  bool authenticate(const std::string& challenge);
  std::string base_url() const;

  store::Reference ref_;
  RegistryOptions opts_;
  bool push_ = false;  // a token asked for then covers pushing too
  std::mutex auth_mutex_;
  std::string authorization_;  // header value, never printed
  std::string basic_;          // "user:password" when known
  // Connections (and TLS sessions) kept between this object's requests:
  // the many small requests of a lazy read would each pay a handshake.
  struct Share;
  std::unique_ptr<Share> share_;
};

// A WWW-Authenticate challenge: its scheme (lowercase) and parameters
// (keys lowercase, values unquoted).
struct Challenge {
  std::string scheme;
  std::map<std::string, std::string> params;
};
Challenge parse_challenge(const std::string& header);
// The token service's URL for a Bearer challenge: realm, service and scope
// (default: pull of `repository`, or pull and push with `push`), escaped.
std::string token_url(const Challenge& challenge, const std::string& repository, bool push = false);
// Whether the basic credentials for a registry (served at `api_host`) may
// go to the token service at `realm`: only over HTTPS when the registry is
// HTTPS, and only to the registry's own host, Docker Hub's auth.docker.io,
// or a host listed in RT_AUTH_REALMS (comma-separated). `why` says why not.
bool may_send_credentials(const std::string& realm, const std::string& api_host, bool plain_http, std::string* why);
// Seconds a blob of `size` bytes may take in all: RT_PULL_TIMEOUT (300)
// plus the size at RT_PULL_MIN_RATE bytes/s (64 KiB/s).
double blob_deadline(int64_t size);

// $HOME/.docker/config.json, where rt login saves credentials.
std::string home_docker_config();
// The keys ~/.docker/config.json may file `registry`'s credentials under.
std::vector<std::string> docker_config_keys(const std::string& registry);

// Credentials for `registry` from ~/.docker/config.json ("auths"), as
// "user:password"; empty when none.
std::string docker_config_credentials(const std::string& registry);
// Saves credentials for `registry` into ~/.docker/config.json (mode 0600).
void save_docker_config_credentials(const std::string& registry, const std::string& user, const std::string& password);
// Removes `registry`'s credentials (every key they may be filed under; all
// of "auths" for an empty `registry`) from ~/.docker/config.json, leaving
// the rest of it as it was; the keys removed.
std::vector<std::string> remove_docker_config_credentials(const std::string& registry);

}  // namespace rt::image

// Registry client over libcurl (host).
#include "image/registry.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <thread>

#include "image/sha256.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

constexpr int kTries = 5;
constexpr size_t kMaxDocument = 4 << 20;

std::once_flag g_curl_init;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) { return util::trim(s, " \r\n"); }

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unbase64(const std::string& in) {
  std::string out(3 * in.size() / 4 + 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return {};
  out.resize(static_cast<size_t>(n));
  while (!in.empty() && in.back() == '=' && !out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::string url_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

// key="value" pairs of a WWW-Authenticate challenge's parameters.
std::map<std::string, std::string> challenge_params(const std::string& s) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    size_t eq = s.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = lower(trim(s.substr(i, eq - i)));
    std::string val;
    size_t j = eq + 1;
    if (j < s.size() && s[j] == '"') {
      ++j;
      while (j < s.size() && s[j] != '"') val += s[j++];
      ++j;
    } else {
      while (j < s.size() && s[j] != ',') val += s[j++];
    }
    out[key] = val;
    i = j;
  }
  return out;
}

}  // namespace

std::string home_docker_config() {
  const char* h = std::getenv("HOME");
  return std::string(h ? h : "") + "/.docker/config.json";
}

std::vector<std::string> docker_config_keys(const std::string& registry) {
  if (registry == "docker.io")
    return {"https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io"};
  return {registry, "https://" + registry, "http://" + registry};
}

RegistryOptions registry_options(const std::string& ca_file, bool insecure, bool plain_http) {
  RegistryOptions ro;
  ro.ca_file = ca_file;
  if (const char* ca = std::getenv("RT_CA_FILE"); ro.ca_file.empty() && ca) ro.ca_file = ca;
  ro.insecure = insecure;
  ro.plain_http = plain_http;
  return ro;
}

Challenge parse_challenge(const std::string& header) {
  Challenge c;
  const size_t space = header.find(' ');
  c.scheme = lower(header.substr(0, space));
  if (space != std::string::npos) c.params = challenge_params(header.substr(space + 1));
  return c;
}

std::string token_url(const Challenge& c, const std::string& repository, bool push) {
  auto param = [&](const char* k) {
    auto it = c.params.find(k);
    return it == c.params.end() ? std::string() : it->second;
  };
  std::string url = param("realm");
  url += url.find('?') == std::string::npos ? "?" : "&";
  url += "service=" + url_escape(param("service"));
  std::string scope =
      c.params.count("scope") ? param("scope") : "repository:" + repository + (push ? ":pull,push" : ":pull");
  url += "&scope=" + url_escape(scope);
  return url;
}

// "host[:port]" of an http(s) URL, lowercase; "" when it has none.
static std::string url_host(const std::string& url) {
  size_t from = url.find("://");
  if (from == std::string::npos) return {};
  from += 3;
  size_t to = url.find_first_of("/?#", from);
  std::string host = lower(url.substr(from, to == std::string::npos ? std::string::npos : to - from));
  if (size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);  // no userinfo
  return host;
}

bool may_send_credentials(const std::string& realm, const std::string& api_host, bool plain_http, std::string* why) {
  // "host:port", the port made explicit from the scheme when missing: on a
  // shared node another port of the same host (localhost above all) may be
  // anybody's.
  auto with_port = [](const std::string& h, const char* port) {
    size_t colon = h.rfind(':');
    return colon == std::string::npos || h.find(']', colon) != std::string::npos ? h + ":" + port : h;
  };
  auto no_port = [](const std::string& h) {
    size_t colon = h.rfind(':');
    return colon == std::string::npos || h.find(']', colon) != std::string::npos ? h : h.substr(0, colon);
  };
  const bool https = lower(realm).starts_with("https://");
  const std::string host = with_port(url_host(realm), https ? "443" : "80");
  const std::string registry = with_port(lower(api_host), plain_http ? "80" : "443");
  if (!plain_http && !https) {
    if (why) *why = "it is not HTTPS, as the registry is";
    return false;
  }
  if (host == registry) return true;
  if (registry == "registry-1.docker.io:443" && host == "auth.docker.io:443") return true;  // Docker Hub's own
  if (const char* allowed = std::getenv("RT_AUTH_REALMS")) {
    std::string list = allowed;
    for (size_t i = 0; i <= list.size();) {
      size_t j = std::min(list.find(',', i), list.size());
      const std::string entry = lower(trim(list.substr(i, j - i)));
      // HOST allows any port of it, HOST:PORT that one.
      if (!entry.empty() && (entry == host || entry == no_port(host))) return true;
      i = j + 1;
    }
  }
  if (why)
    *why = no_port(host) == no_port(registry)
               ? "it is on another port (" + host + ") than the registry (" + registry + ")"
               : "it is on another host (" + host + ") than the registry (" + registry + ")";
  return false;
}

double blob_deadline(int64_t size) {
  auto number = [](const char* name, double fallback) {
    const char* v = std::getenv(name);
    char* end = nullptr;
    double x = v ? std::strtod(v, &end) : 0;
    return v && end != v && *end == '\0' && x > 0 ? x : fallback;
  };
  return number("RT_PULL_TIMEOUT", 300) +
         static_cast<double>(std::max<int64_t>(size, 0)) / number("RT_PULL_MIN_RATE", 64 * 1024);
}

namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};

bool retryable_status(long s) { return s == 429 || s == 408 || (s >= 500 && s <= 599); }

void backoff(int attempt) { std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt)); }

}  // namespace

std::string docker_config_credentials(const std::string& registry) {
  auto text = util::read_file_if_exists(home_docker_config(), 1 << 20);
  if (!text) return {};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("auths") || !j["auths"].is_object()) return {};
  for (const auto& key : docker_config_keys(registry)) {
    const std::string what = "`" + home_docker_config() + "` auths." + key;
    const auto& entry = util::json_object(j["auths"], key, what);
    if (std::string auth = util::json_string(entry, "auth", what); !auth.empty()) return unbase64(auth);
    std::string user = util::json_string(entry, "username", what), pass = util::json_string(entry, "password", what);
    if (!user.empty()) return user + ":" + pass;
  }
  return {};
}

namespace {

// ~/.docker/config.json as a JSON object (empty when there is none).
nlohmann::json read_docker_config(const std::string& path) {
  nlohmann::json j = nlohmann::json::object();
  if (auto text = util::read_file_if_exists(path, 1 << 20)) {
    j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) throw Error("`" + path + "` is not a JSON object; not touching it");
  }
  return j;
}

// Replaces it whole (mode 0600), so a reader never sees half of it.
void write_docker_config(const std::string& path, const nlohmann::json& j) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", dir};
  std::string tmp = path + ".rt-tmp";
  {
    util::UniqueFd fd = util::open_fd(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    util::write_all(fd.get(), j.dump(2) + "\n", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw SysError{errno, "rename", tmp, path};
}

}  // namespace

void save_docker_config_credentials(const std::string& registry, const std::string& user, const std::string& pass) {
  const std::string path = home_docker_config();
  nlohmann::json j = read_docker_config(path);
  std::string key = registry == "docker.io" ? "https://index.docker.io/v1/" : registry;
  if (j.contains("auths") && !j["auths"].is_object())
    throw Error("`" + path + "`: \"auths\" is not a JSON object; not touching it");
  j["auths"][key] = {{"auth", base64(user + ":" + pass)}};
  write_docker_config(path, j);
}

std::vector<std::string> remove_docker_config_credentials(const std::string& registry) {
  const std::string path = home_docker_config();
  nlohmann::json j = read_docker_config(path);
  std::vector<std::string> removed;
  if (!j.contains("auths")) return removed;
  if (!j["auths"].is_object()) throw Error("`" + path + "`: \"auths\" is not a JSON object; not touching it");
  auto& auths = j["auths"];
  if (registry.empty()) {
    for (const auto& item : auths.items()) removed.push_back(item.key());
  } else {
    for (const auto& key : docker_config_keys(registry))
      if (auths.contains(key)) removed.push_back(key);
  }
  if (removed.empty()) return removed;
  for (const auto& key : removed) auths.erase(key);
  write_docker_config(path, j);
  return removed;
}

struct Registry::Response {
  long status = 0;
  CURLcode curl = CURLE_OK;
  std::string curl_error;
  std::string body;
  std::string content_type;
  std::string www_authenticate;
  std::string docker_digest;
  std::string location;
  uint64_t written = 0;
  bool range_ignored = false;  // a full 200 came back for a ranged request
};

struct Registry::Share {
  CURLSH* sh = curl_share_init();
  std::mutex mu[CURL_LOCK_DATA_LAST];
  Share() {
    if (!sh) return;
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, &Share::lock);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, &Share::unlock);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, this);
    for (auto what : {CURL_LOCK_DATA_CONNECT, CURL_LOCK_DATA_SSL_SESSION, CURL_LOCK_DATA_DNS})
      curl_share_setopt(sh, CURLSHOPT_SHARE, what);
  }
  ~Share() {
    if (sh) curl_share_cleanup(sh);
  }
  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Share*>(self)->mu[data].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) { static_cast<Share*>(self)->mu[data].unlock(); }
};

Registry::Registry(store::Reference ref, RegistryOptions opts) : ref_(std::move(ref)), opts_(std::move(opts)) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  share_ = std::make_unique<Share>();
  if (!opts_.username.empty())
    basic_ = opts_.username + ":" + opts_.password;
  else
    basic_ = docker_config_credentials(ref_.registry);
}

Registry::~Registry() = default;

void Registry::check_credentials() {
  const std::string url = std::string(opts_.plain_http ? "http://" : "https://") + ref_.api_host() + "/v2/";
  const std::string refused = "registry `" + ref_.registry + "` refused the credentials of `" + opts_.username + "`";
  const char* hint = "check the user name and password; nothing was saved";
  const long timeout_ms = static_cast<long>(blob_deadline(0) * 1000);
  Response r = request(url, "", -1, 0, nullptr, {}, {-1, timeout_ms});
  if (r.curl == CURLE_OK && r.status == 401 && !r.www_authenticate.empty()) {
    if (!authenticate(r.www_authenticate)) throw Error(refused, hint);
    r = request(url, "", -1, 0, nullptr, {}, {-1, timeout_ms});
  }
  if (r.curl != CURLE_OK)
    throw Error("cannot reach `" + url + "`: " + r.curl_error,
                "for a registry with its own CA, give it with --ca-file; nothing was saved");
  if (r.status == 200) return;
  if (r.status == 401 || r.status == 403) throw Error(refused, hint);
  throw Error("`" + url + "` answered HTTP " + std::to_string(r.status) + "; nothing was saved");
}

std::string Registry::base_url() const {
  return std::string(opts_.plain_http ? "http://" : "https://") + ref_.api_host() + "/v2/" + ref_.repository;
}

namespace {

struct Transfer {
  Registry::Response* resp;
  int fd;
  image::Sha256* hasher;
  const std::function<void(uint64_t)>* progress;
  CURL* curl;
  std::string file;
  uint64_t before;  // bytes already in the file (a resumed download)
  int64_t limit;    // the blob's declared size; -1: unknown
  std::string error;
  const Send* send = nullptr;  // the body going out
  uint64_t sent = 0;
  uint64_t seen = 0;           // a range's bytes come in this try
  std::exception_ptr failed;   // what the sink threw
};

size_t on_read(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const Send& s = *t->send;
  const uint64_t total = s.body ? s.body->size() : s.body_size;
  const size_t want = static_cast<size_t>(std::min<uint64_t>(size * n, total - t->sent));
  if (want == 0) return 0;
  size_t got;
  if (s.body) {
    std::memcpy(data, s.body->data() + t->sent, want);
    got = want;
  } else {
    ssize_t r;
    do r = ::pread(s.body_fd, data, want, static_cast<off_t>(t->sent));
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
      t->error = r == 0 ? "the file ended early" : std::string("read: ") + std::strerror(errno);
      return CURL_READFUNC_ABORT;
    }
    got = static_cast<size_t>(r);
  }
  t->sent += got;
  if (s.progress && *s.progress) (*s.progress)(got);
  return got;
}

// curl rewinds the body to resend it (after a redirect or an auth reply).
int on_seek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  t->sent = static_cast<uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect): reset
    t->resp->content_type.clear();
    t->resp->www_authenticate.clear();
  }
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string k = lower(line.substr(0, colon));
    std::string v = trim(line.substr(colon + 1));
    if (k == "content-type")
      t->resp->content_type = v.substr(0, v.find(';'));
    else if (k == "www-authenticate")
      t->resp->www_authenticate = v;
    else if (k == "docker-content-digest")
      t->resp->docker_digest = v;
    else if (k == "location")
      t->resp->location = v;
  }
  return size * n;
}

// A range's body for the caller as it comes. A retry asks for the range
// again from its start: what the caller had is passed over.
size_t to_sink(Transfer* t, long status, const char* data, size_t len) {
  Send::Sink& s = *t->send->sink;
  if (status == 200 && !s.whole) {
    t->error = "the registry ignores range requests (HTTP 200 for " + t->send->range + ")";
    return 0;
  }
  if (status != 200 && status != 206) return len;  // an error's page
  const uint64_t at = t->seen;
  t->seen += len;
  if (t->limit >= 0 && t->seen > static_cast<uint64_t>(t->limit)) {
    t->error = "the server sends more than the " + std::to_string(t->limit) + " bytes asked for (" + t->send->range + ")";
    return 0;
  }
  if (t->seen <= s.handed) return len;
  const size_t skip = at < s.handed ? static_cast<size_t>(s.handed - at) : 0;
  try {
    s.take(std::string_view(data + skip, len - skip));
  } catch (...) {
    t->failed = std::current_exception();
    return 0;
  }
  s.handed = t->seen;
  return len;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string& body = t->resp->body;
  size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->send->sink) return to_sink(t, status, data, len);
  const bool content = status == 200 || status == 206;
  if (content && t->limit >= 0 &&
      t->before + t->resp->written + body.size() + len > static_cast<uint64_t>(t->limit)) {
    t->error = "the server sends more than the " + std::to_string(t->limit) + " bytes the manifest declares";
    return 0;
  }
  if (t->fd >= 0 && content) {
    if (status == 200 && t->before > 0) {  // the range was ignored: not after what is there
      t->resp->range_ignored = true;
      return 0;
    }
    try {
      util::write_all(t->fd, std::string_view(data, len), t->file);
    } catch (const Error& e) {
      t->error = e.what();
      return 0;
    }
    if (t->hasher) t->hasher->update(data, len);
    t->resp->written += len;
    if (t->progress && *t->progress) (*t->progress)(len);
    return len;
  }
  // Any other document is small.
  if (body.size() + len > kMaxDocument) {
    t->error = "response larger than " + std::to_string(kMaxDocument) + " bytes";
    return 0;
  }
  body.append(data, len);
  return len;
}

}  // namespace

Registry::Response Registry::request(const std::string& url, const std::string& accept, int out_fd,
                                     uint64_t resume_from, void* hasher, const std::function<void(uint64_t)>& progress,
                                     const BlobLimits& limits, const Send& send) {
  Response r;
  std::unique_ptr<CURL, CurlDeleter> c(curl_easy_init());
  if (!c) throw Error("libcurl: cannot create a handle");
  CURL* h = c.get();
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add = [&](const std::string& hdr) { headers.reset(curl_slist_append(headers.release(), hdr.c_str())); };
  if (!accept.empty()) add("Accept: " + accept);
  if (!send.content_type.empty()) add("Content-Type: " + send.content_type);
  if (!send.range.empty()) add("Range: " + send.range);
  {
    std::lock_guard<std::mutex> g(auth_mutex_);
    if (!authorization_.empty()) add("Authorization: " + authorization_);
  }
  char errbuf[CURL_ERROR_SIZE] = "";
  Transfer t{&r, out_fd, static_cast<image::Sha256*>(hasher), &progress, h, url, resume_from, limits.size, {}, &send, 0, 0, {}};
  const std::string method = send.method ? send.method : "GET";
  if (method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (send.body || send.body_fd >= 0) {
    add("Expect:");  // no 100-continue round trip
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &t);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(send.body ? send.body->size() : send.body_size));
    if (method != "PUT") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  } else if (method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  } else if (method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  // HTTP/1.1, not libcurl's default HTTP/2 over TLS: a blob is one
  // stream, and Debian's docker-registry (Go) sends it a third slower over
  // HTTP/2 (877 MB: 1.80 s, 1.19 s over HTTP/1.1; 8 MiB ranges: 28 ms,
  // 22). Nothing here needs HTTP/2's streams: concurrent transfers each
  // take a connection of the shared pool.
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  if (share_->sh) curl_easy_setopt(h, CURLOPT_SHARE, share_->sh);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, opts_.plain_http ? "http,https" : "https");
  curl_easy_setopt(h, CURLOPT_USERAGENT, "rt/" RT_VERSION);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);  // stalled for a minute: retry
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  if (!opts_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, opts_.ca_file.c_str());
  if (opts_.insecure) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (resume_from > 0) curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(resume_from));
  if (limits.timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, limits.timeout_ms);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  r.curl = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
  if (t.failed) std::rethrow_exception(t.failed);
  if (!t.error.empty()) throw Error("`" + url + "`: " + t.error);
  if (r.curl != CURLE_OK) r.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(r.curl);
  return r;
}

bool Registry::authenticate(const std::string& header) {
  const Challenge challenge = parse_challenge(header);
  const std::string& scheme = challenge.scheme;
  auto params = challenge.params;
  if (scheme == "basic") {
    if (basic_.empty()) return false;
    std::lock_guard<std::mutex> g(auth_mutex_);
    authorization_ = "Basic " + base64(basic_);
    return true;
  }
  if (scheme != "bearer" || params["realm"].empty()) return false;
  const std::string url = token_url(challenge, ref_.repository, push_);
  // The token request carries the basic credentials, if any, and nothing
  // else, and only to a token service as safe as the registry.
  std::string why;
  const bool send = !basic_.empty() && may_send_credentials(params["realm"], ref_.api_host(), opts_.plain_http, &why);
  if (!basic_.empty() && !send)
    util::warn("not sending your credentials for " + ref_.registry + " to the token service `" + params["realm"] +
               "`: " + why + "; set RT_AUTH_REALMS=HOST to allow it");
  {
    std::lock_guard<std::mutex> g(auth_mutex_);
    authorization_ = send ? "Basic " + base64(basic_) : "";
  }
  Response r;
  for (int attempt = 0;; ++attempt) {
    r = request(url, "", -1, 0, nullptr, {});
    if ((r.curl == CURLE_OK && !retryable_status(r.status)) || attempt + 1 == kTries) break;
    backoff(attempt);
  }
  std::lock_guard<std::mutex> g(auth_mutex_);
  authorization_.clear();
  if (r.curl != CURLE_OK) throw Error("token service `" + params["realm"] + "`: " + r.curl_error);
  if (r.status == 401 || r.status == 403) return false;
  if (r.status != 200) throw Error("token service `" + params["realm"] + "` answered HTTP " + std::to_string(r.status));
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  std::string token;
  if (j.is_object()) {
    if (j.contains("token") && j["token"].is_string())
      token = j["token"];
    else if (j.contains("access_token") && j["access_token"].is_string())
      token = j["access_token"];
  }
  if (token.empty()) throw Error("token service `" + params["realm"] + "` returned no token");
  authorization_ = "Bearer " + token;
  return true;
}

Registry::Response Registry::request_with_retries(const std::string& url, const std::string& accept, int64_t size,
                                                  const Send& send) {
  bool authed = false;
  // Documents are small (4 MiB at most): the floor of a blob's deadline.
  const long timeout_ms = static_cast<long>(blob_deadline(0) * 1000);
  for (int attempt = 0;; ++attempt) {
    Response r = request(url, accept, -1, 0, nullptr, {}, {size, timeout_ms}, send);
    if (r.curl == CURLE_OK && r.status == 401 && !authed && !r.www_authenticate.empty()) {
      authed = true;
      if (!authenticate(r.www_authenticate))
        throw Error("registry `" + ref_.registry + "` refused access to `" + ref_.repository + "`",
                    basic_.empty() ? "it needs credentials: rt login " + ref_.registry
                                   : "check the credentials for " + ref_.registry);
      --attempt;
      continue;
    }
    bool transient = r.curl != CURLE_OK ? (r.curl != CURLE_SSL_CACERT && r.curl != CURLE_PEER_FAILED_VERIFICATION &&
                                           r.curl != CURLE_UNSUPPORTED_PROTOCOL)
                                        : retryable_status(r.status);
    if (!transient || attempt + 1 >= kTries) {
      if (r.curl != CURLE_OK) {
        std::string hint;
        if (r.curl == CURLE_PEER_FAILED_VERIFICATION || r.curl == CURLE_SSL_CACERT)
          hint =
              "the registry's certificate is not trusted: give its CA with --ca-file, or --insecure for a test "
              "registry";
        throw Error("cannot reach `" + url + "`: " + r.curl_error, hint);
      }
      return r;
    }
    util::debug("retrying `" + url + "` (" + (r.curl != CURLE_OK ? r.curl_error : "HTTP " + std::to_string(r.status)) +
                ")");
    backoff(attempt);
  }
}

Registry::Document Registry::get_manifest(const std::string& reference) {
  if (auto d = find_manifest(reference)) return std::move(*d);
  throw Error("image `" + ref_.str() + "` not found in registry `" + ref_.registry + "` (no manifest `" + reference +
              "`)");
}

std::optional<Registry::Document> Registry::find_manifest(const std::string& reference) {
  static const std::string accept = std::string(media::kOciIndex) + ", " + media::kOciManifest + ", " +
                                    media::kDockerList + ", " + media::kDockerManifest;
  std::string url = base_url() + "/manifests/" + reference;
  Response r = request_with_retries(url, accept);
  if (r.status == 404) return std::nullopt;
  if (r.status != 200) throw Error("`" + url + "` answered HTTP " + std::to_string(r.status));
  Document d{r.body, r.content_type, image::sha256_digest(r.body)};
  if (reference.starts_with("sha256:") && d.digest != reference)
    throw Error("image `" + ref_.str() + "`: manifest digest mismatch: got " + d.digest);
  return d;
}

std::string Registry::get_blob(const Descriptor& d) {
  std::string url = base_url() + "/blobs/" + d.digest;
  Response r = request_with_retries(url, "", d.size);
  if (r.status != 200) throw Error("`" + url + "` answered HTTP " + std::to_string(r.status));
  if (image::sha256_digest(r.body) != d.digest)
    throw Error("image `" + ref_.str() + "` blob `" + d.digest + "`: digest mismatch");
  if (d.size >= 0 && r.body.size() != static_cast<size_t>(d.size))
    throw Error("image `" + ref_.str() + "` blob `" + d.digest + "`: size mismatch");
  return r.body;
}

void Registry::get_blob_range(const Descriptor& d, uint64_t offset, uint64_t length,
                              const std::function<void(std::string_view)>& take) {
  const std::string url = base_url() + "/blobs/" + d.digest;
  const std::string where = "registry `" + ref_.registry + "`, blob `" + d.digest + "` of `" + ref_.str() + "`";
  if (length == 0) return;
  if (d.size >= 0 && (offset > static_cast<uint64_t>(d.size) || length > static_cast<uint64_t>(d.size) - offset))
    throw Error(where + ": bytes " + std::to_string(offset) + "+" + std::to_string(length) + " lie past its end");
  // A registry may answer a range that is the whole blob with all of it.
  Send::Sink sink{take, offset == 0 && d.size >= 0 && length == static_cast<uint64_t>(d.size)};
  Send get;
  get.range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  get.sink = &sink;
  Response r = request_with_retries(url, "", static_cast<int64_t>(length), get);
  if (r.status != 206 && !(r.status == 200 && sink.whole))
    throw Error(where + ": `" + url + "` answered HTTP " + std::to_string(r.status) + " for " + get.range);
  if (sink.handed != length)
    throw Error(where + ": " + std::to_string(sink.handed) + " bytes for " + get.range);
}

void Registry::download_blob(const Descriptor& d, const std::string& file,
                             const std::function<void(uint64_t)>& progress) {
  const std::string url = base_url() + "/blobs/" + d.digest;
  const std::string where = "image `" + ref_.str() + "` layer `" + d.digest + "`";
  util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  auto hasher = std::make_unique<image::Sha256>();
  uint64_t have = 0;
  bool authed = false, restarted = false;
  // One deadline for the whole blob, however many tries: a server that
  // trickles never trips curl's stall detection.
  const double seconds = blob_deadline(d.size);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  for (int attempt = 0;; ++attempt) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw Error(where + ": too slow: " + std::to_string(have) + " of " + std::to_string(d.size) + " bytes in " +
                      std::to_string(static_cast<int>(seconds)) + " s",
                  "the deadline is RT_PULL_TIMEOUT (default 300 s) plus the size at RT_PULL_MIN_RATE "
                  "(default 64 KiB/s); raise them for a slow link");
    Response r = request(url, "", fd.get(), have, hasher.get(), progress, {d.size, static_cast<long>(left.count())});
    if (r.curl == CURLE_OK && r.status == 401 && !authed && !r.www_authenticate.empty()) {
      authed = true;
      if (!authenticate(r.www_authenticate)) throw Error(where + ": access refused by the registry");
      --attempt;
      continue;
    }
    if ((r.range_ignored || r.curl == CURLE_RANGE_ERROR) && have > 0 && !restarted) {
      // The server ignored the range and sends everything again: restart.
      util::warn(where + ": the server cannot resume; restarting");
      if (::ftruncate(fd.get(), 0) != 0 || ::lseek(fd.get(), 0, SEEK_SET) != 0) throw SysError{errno, "truncate", file};
      have = 0;
      hasher = std::make_unique<image::Sha256>();
      restarted = true;
      --attempt;
      continue;
    }
    have += r.written;
    bool ok = r.curl == CURLE_OK && (r.status == 200 || r.status == 206);
    if (ok) break;
    if (r.curl == CURLE_OK && !retryable_status(r.status))
      throw Error(where + ": `" + url + "` answered HTTP " + std::to_string(r.status));
    if (attempt + 1 >= kTries)
      throw Error(where + ": download failed after " + std::to_string(kTries) +
                  " tries: " + (r.curl != CURLE_OK ? r.curl_error : "HTTP " + std::to_string(r.status)));
    // Stopped by the deadline (curl's clock runs a little apart): said above.
    if (r.curl == CURLE_OPERATION_TIMEDOUT &&
        std::chrono::steady_clock::now() + std::chrono::milliseconds(200) >= deadline) {
      std::this_thread::sleep_until(deadline);
      continue;
    }
    util::warn(where + ": " + (r.curl != CURLE_OK ? r.curl_error : "HTTP " + std::to_string(r.status)) +
               "; resuming at byte " + std::to_string(have));
    backoff(attempt);
  }
  std::string got = hasher->digest();
  if (d.size >= 0 && have != static_cast<uint64_t>(d.size))
    throw Error(where + ": size mismatch: received " + std::to_string(have) + " bytes, the manifest says " +
                std::to_string(d.size));
  if (got != d.digest) throw Error(where + ": digest mismatch: the blob hashes to " + got);
}

bool Registry::has_blob(const std::string& digest) {
  push_ = true;
  const std::string url = base_url() + "/blobs/" + digest;
  Send head;
  head.method = "HEAD";
  Response r = request_with_retries(url, "", -1, head);
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  if (r.status == 401 || r.status == 403)
    throw Error("registry `" + ref_.registry + "` refused access to `" + ref_.repository + "`",
                basic_.empty() ? "it needs credentials: rt login " + ref_.registry
                               : "check the credentials for " + ref_.registry);
  throw Error("`" + url + "` answered HTTP " + std::to_string(r.status));
}

std::string Registry::upload_url(const Response& r, const std::string& url) const {
  if (r.location.empty()) throw Error("`" + url + "` answered HTTP 202 without saying where the upload goes");
  if (r.location.starts_with("https://") || r.location.starts_with("http://")) return r.location;
  if (!r.location.starts_with("/")) throw Error("`" + url + "`: an upload location it cannot follow: " + r.location);
  return std::string(opts_.plain_http ? "http://" : "https://") + ref_.api_host() + r.location;
}

bool Registry::mount_blob(const std::string& digest, const std::string& from) {
  push_ = true;
  const std::string url = base_url() + "/blobs/uploads/?mount=" + url_escape(digest) + "&from=" + url_escape(from);
  Send post;
  post.method = "POST";
  Response r = request_with_retries(url, "", -1, post);
  if (r.status == 201) return true;
  if (r.status == 202) {  // an upload was started instead: not needed
    try {
      Send del;
      del.method = "DELETE";
      request(upload_url(r, url), "", -1, 0, nullptr, {}, {-1, 30000}, del);
    } catch (const Error&) {
    }
  }
  return false;
}

void Registry::upload_blob(const Descriptor& d, const std::string& file,
                           const std::function<void(uint64_t)>& progress) {
  push_ = true;
  const std::string where = "image `" + ref_.str() + "` blob `" + d.digest + "`";
  const std::string start = base_url() + "/blobs/uploads/";
  util::UniqueFd fd = util::open_fd(file, O_RDONLY);
  const long timeout_ms = static_cast<long>(blob_deadline(d.size) * 1000);
  for (int attempt = 0;; ++attempt) {
    Send post;
    post.method = "POST";
    Response r = request_with_retries(start, "", -1, post);
    if (r.status == 401 || r.status == 403)
      throw Error("registry `" + ref_.registry + "` refused pushing to `" + ref_.repository + "`",
                  basic_.empty() ? "it needs credentials: rt login " + ref_.registry
                                 : "check that " + ref_.registry + " lets these credentials push there");
    if (r.status != 202) throw Error(where + ": `" + start + "` answered HTTP " + std::to_string(r.status));
    std::string url = upload_url(r, start);
    url += (url.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + url_escape(d.digest);
    Send put;
    put.method = "PUT";
    put.body_fd = fd.get();
    put.body_size = static_cast<uint64_t>(d.size);
    put.content_type = "application/octet-stream";
    put.progress = &progress;
    Response p = request(url, "", -1, 0, nullptr, {}, {-1, timeout_ms}, put);
    if (p.curl == CURLE_OK && p.status == 201) return;
    const bool transient = p.curl != CURLE_OK ? true : retryable_status(p.status);
    const std::string why = p.curl != CURLE_OK ? p.curl_error : "HTTP " + std::to_string(p.status);
    if (!transient || attempt + 1 >= kTries) {
      std::string detail;
      if (p.curl == CURLE_OK && p.status == 400 && !p.body.empty()) detail = ": " + trim(p.body.substr(0, 300));
      throw Error(where + ": upload failed (" + why + ")" + detail,
                  "run the same rt push again: what the registry has is not sent twice");
    }
    util::warn(where + ": " + why + "; sending it again");
    backoff(attempt);
  }
}

Descriptor Registry::put_small_blob(const std::string& data, const std::string& media_type, bool* sent) {
  const Descriptor d{media_type, image::sha256_digest(data), static_cast<int64_t>(data.size()), {}, {}};
  if (sent) *sent = false;
  if (has_blob(d.digest)) return d;
  // Uploads read files: this one is in memory.
  util::UniqueFd mem = util::memory_file("blob");
  util::write_all(mem.get(), data, "blob " + d.digest);
  upload_blob(d, util::fd_path(mem.get()));
  if (sent) *sent = true;
  return d;
}

std::string Registry::put_manifest(const std::string& reference, const std::string& body,
                                   const std::string& media_type) {
  push_ = true;
  const std::string url = base_url() + "/manifests/" + reference;
  Send put;
  put.method = "PUT";
  put.body = &body;
  put.content_type = media_type;
  Response r = request_with_retries(url, "", -1, put);
  if (r.status == 401 || r.status == 403)
    throw Error("registry `" + ref_.registry + "` refused pushing to `" + ref_.repository + "`",
                "check that " + ref_.registry + " lets these credentials push there");
  if (r.status != 201 && r.status != 200) {
    std::string detail = r.body.empty() ? "" : ": " + trim(r.body.substr(0, 300));
    throw Error("`" + url + "` refused the manifest: HTTP " + std::to_string(r.status) + detail);
  }
  const std::string digest = image::sha256_digest(body);
  if (!r.docker_digest.empty() && r.docker_digest != digest)
    throw Error("`" + url + "` stored the manifest as " + r.docker_digest + ", not " + digest);
  return digest;
}

}  // namespace rt::image

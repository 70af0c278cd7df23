// JSON fields with rt's messages (pure); see json.hpp.
#include "util/json.hpp"

#include "rt/error.hpp"

namespace rt::util {
namespace {

using nlohmann::json;

// The field, or nullptr when absent or null.
const json* field(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong(const std::string& what, const std::string& key, const char* want) {
  throw Error(what + ": field `" + key + "` is not " + want);
}

}  // namespace

json parse_json_object(std::string_view text, const std::string& what) {
  constexpr size_t kMaxSize = 4 << 20;
  constexpr int kMaxDepth = 64;
  if (text.size() > kMaxSize)
    throw Error(what + " is larger than " + std::to_string(kMaxSize) + " bytes: refusing to parse it");
  bool too_deep = false;
  json::parser_callback_t cb = [&](int d, json::parse_event_t, json&) {
    if (d > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  json doc = json::parse(text, cb, false);
  if (too_deep) throw Error(what + " is nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (doc.is_discarded() || !doc.is_object()) throw Error(what + " is not a JSON object");
  return doc;
}

std::string json_string(const json& obj, const std::string& key, const std::string& what) {
  const json* f = field(obj, key);
  if (!f) return {};
  if (!f->is_string()) wrong(what, key, "a string");
  return f->get<std::string>();
}

std::vector<std::string> json_strings(const json& obj, const std::string& key, const std::string& what) {
  std::vector<std::string> out;
  const json& list = json_array(obj, key, what);
  for (const auto& v : list) {
    if (!v.is_string()) wrong(what, key, "a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

const json& json_object(const json& obj, const std::string& key, const std::string& what) {
  static const json none;
  const json* f = field(obj, key);
  if (!f) return none;
  if (!f->is_object()) wrong(what, key, "an object");
  return *f;
}

const json& json_array(const json& obj, const std::string& key, const std::string& what) {
  static const json empty = json::array();
  const json* f = field(obj, key);
  if (!f) return empty;
  if (!f->is_array()) wrong(what, key, "a list");
  return *f;
}

}  // namespace rt::util

// Reading fields of JSON documents rt did not write (pure): a field of the
// wrong type is an rt::Error naming the document and the field, never
// nlohmann's own "[json.exception.type_error.302] ..." text.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rt::util {

// Parses a JSON object of at most 4 MiB nested at most 64 deep; throws
// rt::Error naming `what` otherwise.
nlohmann::json parse_json_object(std::string_view text, const std::string& what);

// obj[key] as a string; "" when obj is not an object, or the key is
// absent or null. `what` names the document in the message.
std::string json_string(const nlohmann::json& obj, const std::string& key, const std::string& what);

// obj[key] as a list of strings; empty when absent or null.
std::vector<std::string> json_strings(const nlohmann::json& obj, const std::string& key, const std::string& what);

// obj[key] when it is an object; a null json when absent or null.
const nlohmann::json& json_object(const nlohmann::json& obj, const std::string& key, const std::string& what);

// obj[key] when it is a list; an empty list when absent or null.
const nlohmann::json& json_array(const nlohmann::json& obj, const std::string& key, const std::string& what);

}  // namespace rt::util

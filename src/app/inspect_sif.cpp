// rt inspect FILE.sif: what a SIF file holds, as JSON (host).
#include <fcntl.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/image.hpp"
#include "run/image_root.hpp"
#include "squash/sif.hpp"
#include "squash/sqfs.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

using nlohmann::ordered_json;
constexpr size_t kTextLimit = 1 << 20;

// A data object's bytes, at most kTextLimit of them.
std::string object_text(int fd, const squash::SifObject& o, const std::string& path) {
  return util::read_at(fd, o.offset, std::min<uint64_t>(o.size, kTextLimit), path);
}

}  // namespace

std::string inspect_sif(const std::string& path) {
  util::UniqueFd fd = util::open_fd(path, O_RDONLY | O_NONBLOCK);
  if (!squash::is_sif(fd.get())) throw Error("`" + path + "` is not a SIF file");
  const squash::SifFile sif = squash::read_sif(fd.get(), path);
  ordered_json j;
  j["path"] = util::utf8_escaped(path);
  j["format"] = "SIF";
  j["id"] = sif.id;
  j["arch"] = util::utf8_escaped(squash::sif_arch_name(sif.arch));
  if (sif.created > 0) j["created"] = util::utc_time(sif.created);
  ordered_json objects = ordered_json::array();
  std::optional<std::string> deffile, labels;
  for (const auto& o : sif.objects) {
    ordered_json e;
    e["id"] = o.id;
    e["type"] = squash::sif_type_name(o.type);
    if (o.group & 0xf0000000u && o.group != 0xf0000000u) e["group"] = o.group & 0x0fffffffu;
    if (!o.name.empty()) e["name"] = util::utf8_escaped(o.name);
    e["offset"] = o.offset;
    e["size"] = o.size;
    if (o.type == static_cast<int32_t>(squash::SifData::Partition)) {
      e["filesystem"] = squash::sif_fs_name(o.fs);
      e["partition"] = squash::sif_part_name(o.part);
      e["arch"] = util::utf8_escaped(squash::sif_arch_name(o.arch));
    } else if (o.type == static_cast<int32_t>(squash::SifData::Signature)) {
      e["signer"] = o.entity;
      e["signs"] =
          o.link & 0xf0000000u ? "group " + std::to_string(o.link & 0x0fffffffu) : "object " + std::to_string(o.link);
    } else if (o.type == static_cast<int32_t>(squash::SifData::Deffile)) {
      deffile = object_text(fd.get(), o, path);
    } else if (o.type == static_cast<int32_t>(squash::SifData::Labels)) {
      labels = object_text(fd.get(), o, path);
    }
    objects.push_back(std::move(e));
  }
  j["objects"] = std::move(objects);
  const size_t n = sif.signatures();
  j["signatures"] = n ? std::to_string(n) + ", not verified by rt" : "none";

  // What the root filesystem holds of Apptainer's, when rt can read it.
  std::string root_error;
  try {
    squash::Image root(path);
    if (!labels) labels = root.read_file("/.singularity.d/labels.json", kTextLimit);
    if (!deffile) deffile = root.read_file("/.singularity.d/Singularity", kTextLimit);
    if (auto s = root.read_file(run::kApptainerRunscript, kTextLimit)) j["runscript"] = util::utf8_escaped(*s);
    if (auto s = root.read_file(run::kApptainerStartscript, kTextLimit)) j["startscript"] = util::utf8_escaped(*s);
  } catch (const Error& e) {
    root_error = e.what();
  }
  if (labels) {
    auto parsed = ordered_json::parse(*labels, nullptr, false);
    if (parsed.is_discarded())
      j["labels"] = util::utf8_escaped(*labels);
    else
      j["labels"] = std::move(parsed);
  }
  if (deffile) j["definition"] = util::utf8_escaped(*deffile);
  if (!root_error.empty()) j["root_filesystem"] = "not readable: " + util::utf8_escaped(root_error);
  return j.dump(2) + "\n";
}

std::optional<std::string> inspect_section(const std::string& image, const std::string& section,
                                           const StoreOptions& options) {
  static const std::map<std::string, std::string> kFiles = {
      {"deffile", "/.singularity.d/Singularity"}, {"labels", "/.singularity.d/labels.json"},
      {"runscript", run::kApptainerRunscript},    {"startscript", run::kApptainerStartscript},
      {"test", run::kApptainerTest},              {"help", "/.singularity.d/runscript.help"}};
  if (section != "environment" && !kFiles.count(section))
    throw Error("no section `" + section + "`",
                "sections are deffile, labels, runscript, startscript, test, help and environment");
  const auto root = run::ImageRoot::open(image, util::current_dir(), options.storage, true);
  if (section != "environment") return root->read(kFiles.at(section), kTextLimit);
  std::vector<std::string> names = root->list(run::kApptainerEnvDir);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) {
    const std::string path = std::string(run::kApptainerEnvDir) + "/" + n;
    if (auto text = root->read(path, kTextLimit)) out += "=== " + path + " ===\n" + *text + "\n";
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace rt

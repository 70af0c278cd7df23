// Instances (host); see instance.hpp and rt/instance.hpp.
#include "run/instance.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"

namespace rt {
namespace run {
namespace {

std::string instances_path(const store::Root& store) { return store.sub(store::kInstancesDir); }

}  // namespace

HolderKey instance_key(const std::string& name, const std::string& secret) {
  return {"rt-inst", secret, "instance" + std::string(1, '\0') + name};
}

HolderPolicy instance_policy(const std::string& name, bool may_start) {
  return {.entry = HolderPolicy::Entry::Share,
          .what = "instance `" + name + "`",
          .hint = "rt instance list shows your instances",
          .comm = "rt-instance",
          .title = "rt-instance " + name,
          // Kept while any process is in the container, and not a moment longer.
          .linger = [](int) { return std::chrono::milliseconds(0); },
          .may_start = may_start};
}

util::UniqueFd instance_dir(const store::Root& store, const std::string& name, bool create) {
  check_instance_name(name);
  return store.dir(std::string(store::kInstancesDir) + "/" + name, create);
}

std::string instance_path(const store::Root& store, const std::string& name) {
  return instances_path(store) + "/" + name;
}

void remove_instance(const store::Root& store, const std::string& name) {
  util::UniqueFd all = store.dir(store::kInstancesDir, false);
  if (all && instance_dir(store, name, false)) util::remove_tree_at(all.get(), name, instance_path(store, name));
}

std::string record_text(const InstanceRecord& r) {
  nlohmann::json j = {{"name", r.info.name},
                      {"image", r.info.image},
                      {"command", r.info.command},
                      {"started", r.info.started},
                      {"pid", r.info.pid},
                      {"uid", r.uid},
                      {"gid", r.gid},
                      {"mntns", r.mntns},
                      {"pidns", r.pidns}};
  std::string text;
  try {
    text = j.dump() + "\n";
  } catch (const nlohmann::json::exception&) {
    throw Error("instance `" + r.info.name + "`: its image name or a word of its command is not UTF-8",
                "name the image and the command in UTF-8");
  }
  return text;
}

void write_instance(const store::Root& store, const InstanceRecord& r) {
  const std::string text = record_text(r);
  util::UniqueFd dir = instance_dir(store, r.info.name, true);
  if (!util::write_file_atomic_at(dir.get(), kRecord, text))
    throw Error("cannot write the record of instance `" + r.info.name + "` in `" + instances_path(store) + "`");
}

InstanceRecord read_instance(const store::Root& store, const std::string& name) {
  util::UniqueFd dir = instance_dir(store, name, false);
  std::optional<std::string> text;
  if (dir) text = util::read_owned_at(dir.get(), kRecord, 1 << 20);
  if (!text)
    throw Error("no instance `" + name + "` (in `" + instances_path(store) + "`)",
                "rt instance list shows your instances; rt instance start IMAGE " + name + " starts one");
  const std::string what = "the record of instance `" + name + "`";
  const auto j = util::parse_json_object(*text, what);
  InstanceRecord r;
  r.info.name = name;
  r.info.image = util::json_string(j, "image", what);
  r.info.command = util::json_strings(j, "command", what);
  r.info.started = util::json_string(j, "started", what);
  r.mntns = util::json_string(j, "mntns", what);
  if (j.contains("pidns")) r.pidns = util::json_string(j, "pidns", what);
  try {
    r.info.pid = j.value("pid", 0);
    r.uid = j.value("uid", 0u);
    r.gid = j.value("gid", 0u);
  } catch (const nlohmann::json::exception&) {
    throw Error(what + " is damaged", "rt instance stop " + name + " removes it");
  }
  r.info.logs = instance_path(store, name);
  r.info.running = holder_serving(instance_key(name, store.secret()));
  return r;
}

}  // namespace run

void check_instance_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw Error("`" + name + "` is not an instance name",
                "a letter or digit, then up to 63 letters, digits, '.', '_' or '-'");
}

std::vector<InstanceInfo> list_instances(const std::string& storage) {
  std::vector<InstanceInfo> out;
  const store::Root* store = store::Root::user_if_exists(storage);
  if (!store) return out;
  util::UniqueFd dir = store->dir(store::kInstancesDir, false);
  if (!dir) return out;
  for (const auto& name : util::list_names(dir.get(), run::instances_path(*store))) {
    try {
      check_instance_name(name);
      struct stat st;
      if (::fstatat(dir.get(), (name + "/" + run::kRecord).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        continue;  // being started, or what a killed start left (rt prune removes it)
      out.push_back(run::read_instance(*store, name).info);
    } catch (const Error& e) {
      util::warn(e.what());
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

namespace {

// Signals every process of `r`'s container: those in its mount namespace
// (rt exec instance://NAME adds some) and in its PID namespace (those that
// made mount namespaces of their own); SIGKILL to what is left after
// `timeout_s`, which for the PID namespace's init ends all of it, nested
// namespaces included.
void stop_processes(const run::InstanceRecord& r, int signal, int timeout_s) {
  auto all = [&] {
    std::vector<pid_t> pids = r.mntns.empty() ? std::vector<pid_t>{} : run::processes_in(r.mntns);
    if (!r.pidns.empty())
      for (pid_t pid : run::processes_in(r.pidns))
        if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    return pids;
  };
  auto pids = all();
  for (pid_t pid : pids) ::kill(pid, signal);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (!(pids = all()).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (pids.empty()) return;
  util::info("instance `" + r.info.name + "`: SIGKILL to " + std::to_string(pids.size()) + " process(es) left after " +
             std::to_string(timeout_s) + " s");
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  for (int i = 0; i < 40 && !(pids = all()).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!pids.empty())
    util::warn("instance `" + r.info.name + "`: " + std::to_string(pids.size()) + " process(es) survive SIGKILL");
}

}  // namespace

std::vector<std::string> stop_instances(const std::string& storage, const std::string& name, int signal,
                                        int timeout_s) {
  std::vector<std::string> stopped;
  const store::Root* store = store::Root::user_if_exists(storage);
  std::vector<std::string> names;
  if (!name.empty()) {
    names.push_back(name);
  } else if (store) {
    for (const auto& i : list_instances(storage)) names.push_back(i.name);
  }
  for (const auto& n : names) {
    if (!store) throw Error("no instance `" + n + "` (there is no store yet)");
    const run::InstanceRecord r = run::read_instance(*store, n);
    // Also when its holder has gone, while its keeper lives: processes
    // that left its mount namespace may still run in its PID namespace.
    const bool kept = !r.pidns.empty() && r.info.pid > 0 &&
                      run::namespace_of(std::to_string(r.info.pid), "pid_for_children") == r.pidns;
    if (r.info.running || kept) stop_processes(r, signal, timeout_s);
    // The holder leaves once the container is empty.
    for (int i = 0; i < 100 && run::holder_serving(run::instance_key(n, store->secret())); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    run::remove_instance(*store, n);
    stopped.push_back(n);
  }
  return stopped;
}

std::vector<std::string> prune_instances(const std::string& storage) {
  std::vector<std::string> out;
  for (const auto& i : list_instances(storage))
    if (!i.running) {
      stop_instances(storage, i.name, SIGTERM, 0);
      out.push_back(i.name);
    }
  return out;
}

}  // namespace rt

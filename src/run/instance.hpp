// Instances (host): what the store keeps of each (STORE/instances/NAME/:
// record.json, out.log, err.log) and the holder that keeps its container.
//
// An instance's container is kept by a holder (run/holder) whose socket
// name is keyed with the user's secret and the instance's name, so only
// its owner can find it. The holder exits once no process is left in the
// container: an instance is running exactly as long as its holder serves.
// rt exec instance://NAME enters the holder's namespaces, never starting
// one.
#pragma once
#include <string>
#include <vector>

#include "rt/instance.hpp"
#include "run/holder.hpp"
#include "store/root.hpp"

namespace rt::run {

inline constexpr const char* kRecord = "record.json";

struct InstanceRecord {
  InstanceInfo info;
  uid_t uid = 0, gid = 0;  // inside its container
  std::string mntns;       // its mount namespace, "mnt:[N]"
  std::string pidns;       // its PID namespace, "pid:[N]"; "" in records of older rt
};

HolderKey instance_key(const std::string& name, const std::string& secret);
// may_start: rt instance start builds the container; rt exec only enters.
HolderPolicy instance_policy(const std::string& name, bool may_start);

// STORE/instances/NAME, made when `create`; an empty fd when missing.
util::UniqueFd instance_dir(const store::Root& store, const std::string& name, bool create);
std::string instance_path(const store::Root& store, const std::string& name);
// Removes STORE/instances/NAME (record and logs) when it is there.
void remove_instance(const store::Root& store, const std::string& name);
// The record as written; throws rt::Error when it cannot be (a name or a
// command word that is not UTF-8), which start checks before starting.
std::string record_text(const InstanceRecord& r);
void write_instance(const store::Root& store, const InstanceRecord& r);
// The record of `name`, its `running` filled in; throws rt::Error naming
// the instance when there is none.
InstanceRecord read_instance(const store::Root& store, const std::string& name);

}  // namespace rt::run

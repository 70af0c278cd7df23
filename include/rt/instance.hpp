// Instances: long-running containers, started in the background and
// entered later (rt instance, rt exec instance://NAME).
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "rt/exec.hpp"

namespace rt {

struct InstanceInfo {
  std::string name;
  std::string image;                 // as it was named (a path made absolute)
  std::vector<std::string> command;  // what it started
  std::string started;               // UTC, ISO 8601
  pid_t pid = 0;                     // its first process
  bool running = false;              // its container still has processes
  std::string logs;                  // the directory holding out.log and err.log
};

// Names: a letter or digit, then up to 63 letters, digits, '.', '_' or '-'.
// Throws rt::Error otherwise.
void check_instance_name(const std::string& name);

// rt instance start: runs the image's startscript with `o.command` as its
// arguments (as Apptainer does), else `o.command`, in a new container named
// `name`, detached from the terminal and session,
// its output in STORE/instances/NAME/{out,err}.log. Returns once the
// program has started; throws rt::Error when it cannot (a running instance
// of that name included).
InstanceInfo start_instance(const ExecOptions& o, const std::string& name);

// The user's instances, running or dead, by name.
std::vector<InstanceInfo> list_instances(const std::string& storage);

// Stops instance `name` (every one when empty): `signal` to each process of
// its container, SIGKILL to what is left after `timeout_s`, then its record
// is removed. A dead instance's record is just removed. Returns the names
// stopped; throws rt::Error for an unknown name.
std::vector<std::string> stop_instances(const std::string& storage, const std::string& name, int signal, int timeout_s);

// Removes the records of dead instances (rt prune); returns their names.
std::vector<std::string> prune_instances(const std::string& storage);

// The prefix of IMAGE that names an instance: instance://NAME.
inline constexpr const char* kInstanceScheme = "instance://";

}  // namespace rt

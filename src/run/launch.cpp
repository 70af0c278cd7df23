// Choosing and starting the container's program (container root).
#include "run/launch.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "rt/error.hpp"
#include "run/env.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {

std::vector<std::string> command_for(ExecMode mode, const std::vector<std::string>& args, const ImageConfig* config,
                                     const std::string& image_name, const std::string& shell,
                                     const ApptainerFiles& apptainer) {
  switch (mode) {
    case ExecMode::Exec:
      if (args.empty()) throw Error("no program given to run in image `" + image_name + "`");
      return args;
    case ExecMode::Shell:
      return {shell.empty() ? std::string("/bin/sh") : shell};
    case ExecMode::Test: {
      std::vector<std::string> argv{kApptainerTest};
      argv.insert(argv.end(), args.begin(), args.end());
      return argv;
    }
    case ExecMode::Run: {
      std::vector<std::string> argv;
      if (apptainer.runscript && (!config || (config->entrypoint.empty() && config->cmd.empty()))) {
        argv = {kApptainerRunscript};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
      }
      if (config) argv = config->entrypoint;
      if (!args.empty())
        argv.insert(argv.end(), args.begin(), args.end());
      else if (config)
        argv.insert(argv.end(), config->cmd.begin(), config->cmd.end());
      if (argv.empty())
        throw Error("image `" + image_name + "` has no ENTRYPOINT or CMD",
                    "give the program to run: rt run IMAGE PROG [ARGS...], or use rt exec");
      return argv;
    }
  }
  return args;
}

std::vector<std::string> after_apptainer_env(std::vector<std::string> argv) {
  static const char script[] =
      "for rt_env_script in /.singularity.d/env/*.sh ${SCIF_APPENV:+\"$SCIF_APPENV\"/*.sh}; do "
      "if [ -f \"$rt_env_script\" ]; then . \"$rt_env_script\"; fi; done; unset rt_env_script; exec \"$@\"";
  argv.insert(argv.begin(), {"/bin/sh", "-c", script, "rt-env"});
  return argv;
}

std::vector<std::string> plain_exports(const std::string& script, int* skipped) {
  std::vector<std::string> out;
  int skip = 0;
  for (const auto& raw : util::split(script, '\n')) {
    std::string l = util::trim(raw);
    if (l.empty() || l[0] == '#') continue;
    if (!l.starts_with("export ")) {
      ++skip;
      continue;
    }
    l = util::trim(l.substr(7));
    const size_t eq = l.find('=');
    const std::string name = eq == std::string::npos ? "" : l.substr(0, eq);
    std::string v = eq == std::string::npos ? "" : l.substr(eq + 1);
    const bool good_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                           name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                               std::string::npos;
    bool plain = good_name;
    if (plain && v.size() >= 2 && v.front() == '\'' && v.back() == '\'') {
      v = v.substr(1, v.size() - 2);
      plain = v.find('\'') == std::string::npos;
    } else if (plain && v.size() >= 2 && v.front() == '"' && v.back() == '"') {
      v = v.substr(1, v.size() - 2);
      plain = v.find_first_of("\"$`\\") == std::string::npos;
    } else if (plain) {
      plain = v.find_first_of(" \t\"'$`\\;|&<>(){}*?[]~") == std::string::npos;
    }
    if (!plain) {
      ++skip;
      continue;
    }
    out.push_back(name + "=" + v);
  }
  if (skipped) *skipped = skip;
  return out;
}

namespace {

// Where `prog` may be, in order: itself when it names a path, else each
// directory of the container's PATH (the default when env sets none).
std::vector<std::string> candidates(const std::string& prog, const std::vector<std::string>& env) {
  if (prog.find('/') != std::string::npos) return {prog};
  std::string path = kDefaultPath;
  for (const auto& kv : env)
    if (kv.starts_with("PATH=")) path = kv.substr(5);
  std::vector<std::string> out;
  for (const auto& dir : util::split(path, ':')) out.push_back((dir.empty() ? std::string(".") : dir) + "/" + prog);
  return out;
}

}  // namespace

bool program_found(const std::string& prog, const std::vector<std::string>& env) {
  for (const auto& c : candidates(prog, env))
    if (::access(c.c_str(), X_OK) == 0) return true;
  return false;
}

[[noreturn]] void exec_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                               const std::string& image_name) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const auto& kv : env) cenv.push_back(const_cast<char*>(kv.c_str()));
  cenv.push_back(nullptr);

  const std::string& prog = argv.front();
  int err = ENOENT;
  bool denied = false;
  const bool named_path = prog.find('/') != std::string::npos;
  for (const auto& cand : candidates(prog, env)) {
    ::execve(cand.c_str(), cargv.data(), cenv.data());
    if (named_path) {
      err = errno;
    } else if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  if (denied && err == ENOENT) err = EACCES;
  int code = err == ENOENT || err == ENOTDIR ? kExitNotFound : kExitNotExecutable;
  util::error("cannot run " + util::quoted(prog) + " in image `" + image_name + "`: " +
              (code != kExitNotFound ? std::strerror(err)
               : !named_path         ? std::string("executable file not found in $PATH")
               : ::access(prog.c_str(), F_OK) == 0
                   ? std::string("its interpreter (#! line or ELF loader) is not in the image")
                   : std::strerror(err)) +
              (err == EIO && image_name.starts_with("oras://")
                   ? " (the image is read from its registry as it runs, and this part of it could not be fetched "
                     "into the node cache: is the registry reachable?)"
                   : ""));
  ::_exit(code);
}

}  // namespace rt::run

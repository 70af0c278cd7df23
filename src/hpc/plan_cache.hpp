// A per-user cache of whole injection plans (host). Every rank of a job,
// and every later step, asks for the same injection into the same image:
// the plan is kept with the identity of every host and image file it was
// made from, and reused while all of them are as they were. A hit costs a
// stat per input instead of the planner's lookups, ELF facts and closures.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "hpc/inject.hpp"
#include "hpc/site_config.hpp"

namespace rt::hpc {

// The key of a request: everything a plan depends on besides its inputs
// (the request, the site configuration, the image's name and identity,
// rt itself). "" when a plan of this request is not cached (CDI devices:
// their specs are read outside the planner's record).
std::string plan_key(const InjectRequest& req, const SiteConfig& conf, const ImageView& image);

class PlanCache {
public:
  // The plans live in directory `name` of directory `dirfd` (the user's
  // store, which the caller keeps open), a file per key; a file that is
  // not the caller's is no plan.
  PlanCache(int dirfd, std::string name);
  // The plan kept under `key`, if every input is as it was.
  std::optional<Injection> find(const std::string& key, const ImageView& image) const;
  // Keeps `plan` under `key`; the oldest beyond the newest 32 go. Errors
  // are ignored: the cache is only an optimisation.
  void store(const std::string& key, const PlanInputs& inputs, const Injection& plan) const;

private:
  int dirfd_;
  std::string name_;
};

}  // namespace rt::hpc

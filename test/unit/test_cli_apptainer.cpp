// bin/apptainer: Apptainer's command line turned into rt's (pure).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "apptainer.hpp"
#include "rt/error.hpp"

using rt::cli::translate_apptainer;
using V = std::vector<std::string>;

namespace {

// The one rt command line a command becomes.
V step(const V& words, const V& env = {}) {
  const auto plan = translate_apptainer(words, env);
  REQUIRE(plan.steps.size() == 1);
  return plan.steps[0];
}

bool has_run(const V& w, const V& run) { return std::search(w.begin(), w.end(), run.begin(), run.end()) != w.end(); }

std::string apptainer_refusal(const V& words) {
  try {
    translate_apptainer(words, {});
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("apptainer: the version as clients parse it") {
  CHECK(translate_apptainer({"--version"}, {}).print == "apptainer version 1.3.0\n");
  CHECK(translate_apptainer({"version"}, {}).print == "1.3.0\n");
  CHECK(translate_apptainer({"-s", "--version"}, {}).print == "apptainer version 1.3.0\n");
}

TEST_CASE("apptainer exec: options become rt's, the command stays its own") {
  const V w = step({"-s", "exec", "-B", "/a,/b:/c:ro", "--pwd", "/w", "-e", "img.sif", "ls", "-e", "--pwd"});
  CHECK(w.front() == "exec");
  CHECK(has_run(w, {"-q"}));
  CHECK(has_run(w, {"--bind", "/a"}));
  CHECK(has_run(w, {"--bind", "/b:/c:ro"}));
  CHECK(has_run(w, {"--cd", "/w"}));
  CHECK(has_run(w, {"--clean-env"}));  // Apptainer's -e
  CHECK(has_run(w, {"--", "img.sif", "--", "ls", "-e", "--pwd"}));
}

TEST_CASE("apptainer exec: -C, --net --network none, -W, -S, --home, forms of values") {
  const auto plan = translate_apptainer(
      {"exec", "-C", "--net", "--network=none", "-W", "/x", "-S", "/tmp", "--home", "/h:/home/u", "-Bq:/q", "i", "p"},
      {});
  const V& w = plan.steps[0];
  for (const char* o : {"--contain", "--clean-env", "--pid", "--ipc"}) CHECK(has_run(w, {o}));
  CHECK(has_run(w, {"--net", "none"}));
  CHECK(has_run(w, {"--tmpfs", "/tmp"}));
  CHECK(has_run(w, {"--home", "/h:/home/u"}));
  CHECK(has_run(w, {"--bind", "q:/q"}));
  CHECK(has_run(w, {"--bind", "/x/tmp:/tmp", "--bind", "/x/var_tmp:/var/tmp"}));
  CHECK(plan.make_dirs == V{"/x/tmp", "/x/var_tmp"});
  // -W without --contain changes nothing.
  CHECK(translate_apptainer({"exec", "-W", "/x", "i", "p"}, {}).make_dirs.empty());
}

TEST_CASE("apptainer: APPTAINERENV_ and SINGULARITYENV_ become variables inside, APPTAINERENV_ first") {
  const V w = step({"exec", "i", "p"},
                   {"SINGULARITYENV_A=s", "APPTAINERENV_A=a", "SINGULARITYENV_B=b", "HOME=/h", "APPTAINER_BIND=/d:/e"});
  CHECK(has_run(w, {"--env", "A=a"}));
  CHECK(has_run(w, {"--env", "B=b"}));
  CHECK(!has_run(w, {"--env", "A=s"}));
  CHECK(has_run(w, {"--bind", "/d:/e"}));
  CHECK(has_run(w, {"--unset-env", "APPTAINERENV_*"}));
  CHECK(has_run(w, {"--env", "APPTAINER_NAME=i"}));
}

TEST_CASE("apptainer: --env splits at a comma before NAME=") {
  const V w = step({"exec", "--env", "A=1,2,B=x y", "i", "p"});
  CHECK(has_run(w, {"--env", "A=1,2"}));
  CHECK(has_run(w, {"--env", "B=x y"}));
}

TEST_CASE("apptainer: what rt cannot honour is refused, named, with the reason") {
  CHECK_THAT(apptainer_refusal({"exec", "--net", "i", "p"}), Catch::Contains("needs root"));
  CHECK_THAT(apptainer_refusal({"exec", "--rocm", "i", "p"}), Catch::Contains("--rocm"));
  CHECK_THAT(apptainer_refusal({"exec", "--memory", "1G", "i", "p"}), Catch::Contains("cgroup"));
  CHECK_THAT(apptainer_refusal({"exec", "--cpus=2", "i", "p"}), Catch::Contains("--cpus"));
  CHECK_THAT(apptainer_refusal({"exec", "-B", "/a:/b:image-src=/x", "i", "p"}), Catch::Contains("image-src"));
  CHECK_THAT(apptainer_refusal({"exec", "--frob", "i", "p"}), Catch::Contains("unknown option `--frob`"));
  CHECK_THAT(apptainer_refusal({"exec", "i"}), Catch::Contains("no program"));
  CHECK_THAT(apptainer_refusal({"exec", "library://x/y", "p"}), Catch::Contains("library://"));
  CHECK_THAT(apptainer_refusal({"oci", "run"}), Catch::Contains("`oci`"));
  CHECK_THAT(apptainer_refusal({"overlay", "create", "--fakeroot", "o.img"}), Catch::Contains("--fakeroot"));
  CHECK_THAT(apptainer_refusal({"build", "--notest", "x.sif", "docker://debian"}), Catch::Contains("for definition files"));
}

TEST_CASE("apptainer overlay create: rt overlay create") {
  CHECK(step({"overlay", "create", "--size=128", "--sparse", "--create-dir", "/opt", "o.img"}) ==
        V{"overlay", "create", "--size", "128", "--sparse", "--create-dir", "/opt", "--", "o.img"});
  CHECK(step({"overlay", "create", "-s", "8", "o.img"}) == V{"overlay", "create", "--size", "8", "--", "o.img"});
  // Into a SIF file: its overlay partition (rt overlay create adds it).
  CHECK(step({"overlay", "create", "x.sif"}) == V{"overlay", "create", "--", "x.sif"});
}

TEST_CASE("apptainer pull and build: rt pull, then rt convert to one file") {
  auto plan = translate_apptainer({"pull", "--name", "x.simg", "docker://reg:5000/a/b:1"}, {});
  REQUIRE(plan.steps.size() == 2);
  CHECK(plan.steps[0] == V{"pull", "--", "reg:5000/a/b:1"});
  CHECK(plan.steps[1] == V{"convert", "--to", "sif", "--", "reg:5000/a/b:1", "x.simg"});
  CHECK(plan.refuse_if_exists == "x.simg");
  plan = translate_apptainer({"pull", "--force", "docker://alpine"}, {});
  CHECK(plan.steps[1].back() == "alpine_latest.sif");
  CHECK(plan.refuse_if_exists.empty());
  plan = translate_apptainer({"build", "--sandbox", "dir", "docker-archive://a.tar"}, {});
  CHECK(plan.steps == std::vector<V>{{"convert", "--to", "rootfs", "--", "a.tar", "dir"}});
  // A definition file: rt build under a name of its own, the file from
  // that, the name removed.
  plan = translate_apptainer({"build", "-T", "--build-arg", "A=1", "out/My.sif", "r.def"}, {});
  CHECK(plan.steps == std::vector<V>{{"build", "-t", "apptainer-build-my-sif", "-f", "r.def", "--notest", "--build-arg",
                                      "A=1", "--", "."},
                                     {"convert", "--to", "sif", "--", "apptainer-build-my-sif", "out/My.sif"},
                                     {"rm", "apptainer-build-my-sif"}});
  CHECK(plan.refuse_if_exists == "out/My.sif");
}

TEST_CASE("apptainer pull and push of oras://: rt pull and rt push of the SIF file") {
  auto plan = translate_apptainer({"pull", "oras://reg:5000/a/b:1"}, {});
  CHECK(plan.steps == std::vector<V>{{"pull", "--", "oras://reg:5000/a/b:1", "b_1.sif"}});
  CHECK(plan.refuse_if_exists == "b_1.sif");
  plan = translate_apptainer({"-q", "pull", "--force", "--dir", "d", "x.sif", "oras://reg/a"}, {});
  CHECK(plan.steps == std::vector<V>{{"pull", "-q", "--", "oras://reg/a", "d/x.sif"}});
  CHECK(plan.refuse_if_exists.empty());
  CHECK(step({"push", "-U", "/p/x.sif", "oras://reg:5000/a/b:1"}) ==
        V{"push", "--", "/p/x.sif", "oras://reg:5000/a/b:1"});
  CHECK_THAT(apptainer_refusal({"push", "/p/x.sif", "library://a/b"}), Catch::Contains("oras://"));
  CHECK_THAT(apptainer_refusal({"push", "--docker-login", "/p/x.sif", "oras://a/b"}), Catch::Contains("--docker-login"));
  CHECK_THAT(apptainer_refusal({"push", "/p/x.sif"}), Catch::Contains("usage"));
  // Run from a registry: pulled first.
  CHECK_THAT(apptainer_refusal({"exec", "oras://reg/a:1", "p"}), Catch::Contains("once it is pulled"));
}

TEST_CASE("apptainer inspect's flags and run-help: one section") {
  CHECK(step({"inspect", "--deffile", "x.sif"}) == V{"inspect", "--section", "deffile", "x.sif"});
  CHECK(step({"inspect", "-e", "-l", "img"}) == V{"inspect", "--section", "environment", "img"});  // the first given
  CHECK(step({"inspect", "--json", "img"}) == V{"inspect", "img"});
  CHECK(step({"run-help", "img"}) == V{"inspect", "--section", "help", "img"});
}

TEST_CASE("apptainer verify and sign: rt verify and rt sign, Apptainer's keyring without --key") {
  CHECK(step({"verify", "--key", "k.asc", "-l", "--legacy-insecure", "x.sif"}) ==
        V{"verify", "--key", "k.asc", "--legacy-insecure", "--", "x.sif"});
  CHECK(step({"verify", "x.sif"}, {"HOME=/h"}) == V{"verify", "--key", "/h/.apptainer/keys/pgp-public", "--", "x.sif"});
  CHECK(step({"sign", "x.sif"}, {"APPTAINER_KEYSDIR=/k", "HOME=/h"}) ==
        V{"sign", "--key", "/k/pgp-secret", "--", "x.sif"});
  CHECK(step({"sign", "--key=s.asc", "x.sif"}) == V{"sign", "--key", "s.asc", "--", "x.sif"});
  CHECK_THAT(apptainer_refusal({"verify", "-u", "https://keys", "--key", "k", "x.sif"}), Catch::Contains("--url") || Catch::Contains("-u"));
  CHECK_THAT(apptainer_refusal({"verify", "--certificate", "c.pem", "x.sif"}), Catch::Contains("X.509"));
  CHECK_THAT(apptainer_refusal({"sign", "-k", "1", "x.sif"}), Catch::Contains("-k is not supported"));
  CHECK_THAT(apptainer_refusal({"verify", "-g", "2", "--key", "k", "x.sif"}), Catch::Contains("every object group"));
}

TEST_CASE("apptainer test, instance and cache") {
  auto plan = translate_apptainer({"-q", "test", "-C", "img"}, {});
  CHECK(plan.test);
  CHECK(plan.steps[0].front() == "exec");
  const V w = step({"instance", "start", "-B", "/d", "img", "web", "arg"});
  CHECK(has_run(w, {"--", "img", "web", "arg"}));
  CHECK(w[0] == "instance");
  CHECK(step({"instance", "stop", "-a"}) == V{"instance", "stop", "--all"});
  CHECK(step({"cache", "clean", "-f"}) == V{"prune"});
}

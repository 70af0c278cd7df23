// `rt pull`, `rt import`, `rt build`, `rt images`, `rt inspect`, `rt verify`, `rt sign`,
// `rt rm`, `rt prune`, `rt login`: fill the options, call librt.
#include <sys/stat.h>

#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"

namespace rt::cli {
namespace {

struct Common {
  int verbose = 0;
  bool quiet = false;
  std::string storage;
  void add(CLI::App* sub) {
    sub->add_flag("-v,--verbose", verbose, "more detail; twice for debugging");
    sub->add_flag("-q,--quiet", quiet, "print errors only");
    sub->add_option("--storage", storage, "image store (default: $RT_STORAGE or /var/tmp/$USER.rt)")->type_name("DIR");
  }
  void fill(StoreOptions& o) const {
    o.storage = storage;
    o.verbosity = quiet ? -1 : verbose;
  }
};

// A subcommand whose State holds `common` (the shared options) and `o`
// (the command's options, filled from `common` before `run`).
template <class State>
Command make(CLI::App& app, const char* name, const char* help, std::shared_ptr<State> s,
             std::function<int(State&)> run) {
  Command c;
  c.app = app.add_subcommand(name, help);
  s->common.add(c.app);
  c.run = [s, run] {
    s->common.fill(s->o);
    return run(*s);
  };
  return c;
}

// The same for a command whose work is one subcommand, `sub` (rt key
// generate, rt overlay create, rt site-store index), which takes -v and -q
// and no store; its own options go to `sub`.
template <class State>
Command make_with_sub(CLI::App& app, const char* name, const char* help, const char* sub_name, const char* sub_help,
                      CLI::App*& sub, std::shared_ptr<State> s, std::function<int(State&)> run) {
  Command c;
  c.app = app.add_subcommand(name, help);
  c.app->require_subcommand(1);
  sub = c.app->add_subcommand(sub_name, sub_help);
  sub->add_flag("-v,--verbose", s->common.verbose, "more detail; twice for debugging");
  sub->add_flag("-q,--quiet", s->common.quiet, "print errors only");
  c.run = [s, run] {
    s->common.fill(s->o);
    return run(*s);
  };
  return c;
}

// The state of a store command whose only option of its own is --json.
struct JsonState {
  Common common;
  StoreOptions o;
  bool json = false;
};

std::string json_escape(const std::string& s) { return nlohmann::json(s).dump(); }

// What pull and import share: the size guard and writing SquashFS directly.
void add_import_options(CLI::App* app, ImportOptions& o) {
  app->add_option("--max-size", o.max_bytes, "refuse images larger than BYTES unpacked (default 64 GiB)")
      ->type_name("BYTES");
  app->add_option("--squash", o.squash, "write the image as this SquashFS file, straight from the layers")
      ->type_name("FILE");
  app->add_option(
         "--format", o.format,
         "keep it in the store as dir (a tree, default) or sqfs (one SquashFS file; default: $RT_STORE_FORMAT)")
      ->type_name("FORMAT");
  app->add_option("--compression", o.compression,
                  "with --squash or --format sqfs: zstd (default), gzip, lz4, xz or lzo")
      ->type_name("ALG");
  app->add_option("--level", o.level, "with --squash or --format sqfs: compression level (default: zstd 3, gzip 6)")
      ->type_name("N");
}

// --ca-file, --insecure and --plain-http: how pull, push and login reach a registry.
void add_registry_options(CLI::App* app, std::string& ca_file, bool& insecure, bool& plain_http) {
  app->add_option("--ca-file", ca_file, "trust the CA certificates in FILE too")->type_name("FILE");
  app->add_flag("--insecure", insecure, "do not verify the registry's TLS certificate (test registries)");
  app->add_flag("--plain-http", plain_http, "talk HTTP, not HTTPS (test registries)");
}

// --sign-by, --sign-by-key, --sign-by-sigstore-private-key,
// --sign-passphrase-file: how push (and build --push) signs the manifest
// it pushes, skopeo copy's names.
void add_push_sign_options(CLI::App* app, PushSigning& o) {
  app->add_option("--sign-by", o.by,
                  "sign the manifest pushed with this secret key of your GnuPG keyring (a simple signature in the "
                  "lookaside store registries.d names)")
      ->type_name("FINGERPRINT");
  app->add_option("--sign-by-key", o.by_key, "sign with the secret key in FILE instead (armoured or binary)")
      ->type_name("FILE");
  app->add_option("--sign-by-sigstore-private-key", o.by_sigstore_key,
                  "sign with the sigstore private key in FILE (cosign's format: rt key generate, skopeo "
                  "generate-sigstore-key), attached in the registry (registries.d: use-sigstore-attachments)")
      ->type_name("FILE");
  app->add_option("--sign-passphrase-file", o.passphrase_file,
                  "the signing key's passphrase is FILE's first line (default: $RT_SIGN_PASSPHRASE, else asked)")
      ->type_name("FILE");
}

}  // namespace

void add_image_commands(CLI::App& app, std::vector<Command>& out) {
  {
    struct S {
      Common common;
      PullOptions o;
      std::string ref, max_size;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "pull", "download an image from a registry into the store", s, [](S& st) {
      pull(st.ref, st.o);
      return 0;
    });
    c.app->add_option("--platform", s->o.platform, "OS/ARCH[/VARIANT] to pull (default: this host's)")
        ->type_name("PLATFORM");
    add_registry_options(c.app, s->o.ca_file, s->o.insecure, s->o.plain_http);
    c.app->add_option("-j,--jobs", s->o.jobs, "parallel layer downloads (default 4)")->type_name("N");
    c.app->add_flag("--if-missing", s->o.if_missing, "do nothing when the store has an image of that name");
    c.app
        ->add_option("--policy", s->o.policy,
                     "the trust policy (containers-policy.json; default: ~/.config/containers/policy.json, else "
                     "/etc/containers/policy.json)")
        ->type_name("FILE");
    add_import_options(c.app, s->o);
    c.app->add_option("ref", s->ref,
                      "image reference, e.g. ubuntu:24.04 or docker://ghcr.io/org/img:tag; oras://REF: a SIF file")
        ->required()
        ->type_name("REF");
    c.app
        ->add_option("name", s->o.name,
                     "store it under NAME (default: the canonical reference); for oras:// the SIF file to write "
                     "(default: NAME_TAG.sif here)")
        ->type_name("NAME");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      ImportOptions o;
      std::string source;
    };
    auto s = std::make_shared<S>();
    Command c =
        make<S>(app, "import", "store an image from a docker-archive, OCI layout or root-filesystem tar", s, [](S& st) {
          import_image(st.source, st.o);
          return 0;
        });
    add_import_options(c.app, s->o);
    c.app
        ->add_option("source", s->source,
                     "docker save tarball, OCI layout directory or archive[:TAG], or rootfs tar(.gz)")
        ->required()
        ->type_name("SOURCE");
    c.app->add_option("name", s->o.name, "store it under NAME (default: its tag, else the file name)")
        ->type_name("NAME");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      BuildOptions o;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "build", "build an image from a Dockerfile or an Apptainer definition file, without root", s, [](S& st) {
      build(st.o);
      return 0;
    });
    c.app->add_option("-t,--tag", s->o.tag, "store the image under NAME")->required()->type_name("NAME");
    c.app
        ->add_option("-f,--file", s->o.file,
                     "the Dockerfile or definition file (default: CONTEXT/Dockerfile; - reads stdin)")
        ->type_name("FILE");
    c.app->add_option("--build-arg", s->o.build_args, "set the build argument K (K alone: from the environment)")
        ->type_name("K=V");
    c.app->add_option("--build-arg-file", s->o.build_arg_files, "build arguments from a file of K=V lines")
        ->type_name("FILE");
    c.app->add_flag("--notest", s->o.no_test, "do not run a definition file's %test section");
    c.app->add_flag("--warn-unused-build-args", s->o.warn_unused_args,
                    "a build argument a definition file does not use is a warning, not an error");
    c.app->add_option("--target", s->o.target, "build this stage and what it needs (default: the last)")
        ->type_name("STAGE");
    c.app->add_flag("--no-cache", s->o.no_cache, "run every step again (the results are still cached)");
    c.app->add_option("--policy", s->o.policy,
                      "the trust policy for base images pulled (containers-policy.json; default: as rt pull)")
        ->type_name("FILE");
    c.app->add_flag("--from-host", s->o.host_paths,
                    "FROM and COPY --from may name a directory, SquashFS or SIF file of this machine");
    c.app
        ->add_option("--format", s->o.format,
                     "keep it in the store as dir (a tree, default) or sqfs (default: $RT_STORE_FORMAT)")
        ->type_name("FORMAT");
    c.app
        ->add_option("-o,--output", s->o.output,
                     "also write the image there: *.sqfs, *.sif, *.tar, oci:DIR, oci-archive:FILE or a directory")
        ->type_name("DST");
    c.app->add_option("--push", s->o.push, "then push it to REF, as rt push does")->type_name("REF");
    add_push_sign_options(c.app, s->o.push_sign);
    c.app->add_option("--secret", s->o.secrets, "a secret for RUN --mount=type=secret: from a file or a variable")
        ->type_name("id=ID,src=FILE|env=VAR");
    c.app->add_option("--ssh", s->o.ssh, "an SSH agent for RUN --mount=type=ssh: default ($SSH_AUTH_SOCK) or ID=SOCKET")
        ->type_name("default|ID=SOCKET");
    c.app
        ->add_option("context", s->o.context,
                     "the directory COPY and ADD read from; or a definition file (its %files read from here)")
        ->required()
        ->type_name("CONTEXT");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      ConvertOptions o;
      std::string src, dst;
    };
    auto s = std::make_shared<S>();
    Command c =
        make<S>(app, "convert", "convert an image between SquashFS, directory, store and archive forms", s, [](S& st) {
          convert(st.src, st.dst, st.o);
          return 0;
        });
    c.app->add_option("--compression", s->o.compression, "zstd (default), gzip, lz4, xz or lzo")->type_name("ALG");
    c.app->add_option("--level", s->o.level, "compression level (default: zstd 3, gzip 6)")->type_name("N");
    c.app->add_option("-j,--jobs", s->o.jobs, "compression threads (default: all processors)")->type_name("N");
    c.app->add_flag("-f,--force", s->o.force, "replace DST if it exists");
    c.app
        ->add_option(
            "--to", s->o.to,
            "sqfs, sif, docker-archive, oci, oci-archive, dir, rootfs or store (default: from DST: *.sqfs, *.sif, *.tar, "
            "oci:DIR, oci-archive:FILE, a path, a name)")
        ->type_name("FORM");
    c.app
        ->add_option(
            "--format", s->o.format,
            "into the store: keep it as dir (a tree, default) or sqfs (one SquashFS file; default: $RT_STORE_FORMAT)")
        ->type_name("FORMAT");
    c.app
        ->add_option(
            "src", s->src,
            "store name, bundle or root-filesystem directory, SquashFS file, docker-archive, OCI layout or rootfs tar")
        ->required()
        ->type_name("SRC");
    c.app
        ->add_option("dst", s->dst,
                     "*.sqfs, *.sif, *.tar (Docker archive), oci:DIR, oci-archive:FILE, a bundle directory (a path) "
                     "or a store name")
        ->required()
        ->type_name("DST");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      PushOptions o;
      std::string image, ref;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "push", "send an image to a registry", s, [](S& st) {
      push(st.image, st.ref, st.o);
      return 0;
    });
    add_registry_options(c.app, s->o.ca_file, s->o.insecure, s->o.plain_http);
    c.app
        ->add_option("--compression", s->o.compression,
                     "for layers kept uncompressed: gzip (default, every client reads it) or zstd")
        ->type_name("ALG");
    c.app->add_option("-j,--jobs", s->o.jobs, "compression threads (default: all processors)")->type_name("N");
    add_push_sign_options(c.app, s->o.sign);
    c.app->add_option("image", s->image, "stored image (or any image rt convert reads)")
        ->required()
        ->type_name("IMAGE");
    c.app->add_option("ref", s->ref,
                      "where to: REGISTRY/REPOSITORY[:TAG] (default: IMAGE's own name); oras://REF: as a SIF file")
        ->type_name("REF");
    out.push_back(std::move(c));
  }
  {
    // What rt exec oras://REF runs: the node cache's entry made (once per
    // node), then filled by the server's fetcher (squash/lazy.hpp).
    struct S {
      Common common;
      PullOptions o;
      std::string ref;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "lazy-open", "", s, [](S& st) {
      lazy_open(st.ref, st.o);
      return 0;
    });
    c.app->group("");
    add_registry_options(c.app, s->o.ca_file, s->o.insecure, s->o.plain_http);
    c.app->add_option("--policy", s->o.policy)->type_name("FILE");
    c.app->add_option("--platform", s->o.platform)->type_name("PLATFORM");
    c.app->add_option("ref", s->ref)->required()->type_name("REF");
    out.push_back(std::move(c));
  }
  {
    struct S {
      std::string dir;
      bool fill = false;
    };
    auto s = std::make_shared<S>();
    Command c;
    c.app = app.add_subcommand("lazy-fetch", "");
    c.app->group("");
    c.app->add_flag("--fill,!--no-fill", s->fill);
    c.app->add_option("dir", s->dir)->required()->type_name("DIR");
    c.run = [s] { return lazy_fetch(s->dir, s->fill); };
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StageOptions o;
      std::vector<std::string> images;
      std::string node_prepare, node_clean;
      bool step = false;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "stage", "copy images once to every node of a Slurm job, for its steps", s, [](S& st) {
      if (!st.node_prepare.empty() || !st.node_clean.empty()) {
        stage_node(st.node_prepare + st.node_clean, st.node_prepare.empty(), st.o);
      } else if (st.step) {
        if (st.images.size() != 1) throw Error("rt stage --step takes one image");
        stage_step(st.images[0], st.o);
      } else {
        if (st.images.empty() != st.o.clean)
          throw Error(st.o.clean ? "rt stage --clean takes no image" : "rt stage: no image given");
        stage(st.images, st.o);
      }
      return 0;
    });
    c.app->add_flag("--clean", s->o.clean, "remove the job's copies from every node");
    // What stage and exec run on the nodes.
    c.app->add_option("--node-prepare", s->node_prepare)->group("")->type_name("JOB");
    c.app->add_option("--node-clean", s->node_clean)->group("")->type_name("JOB");
    c.app->add_flag("--step", s->step)->group("");
    c.app->add_option("images", s->images, "SquashFS or SIF files, or stored images (pulled once when missing)")
        ->type_name("IMAGE");
    out.push_back(std::move(c));
  }
  {
    using S = JsonState;
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "images", "list the images in the store, then the site's (store.site)", s, [](S& st) {
      auto list = list_images(st.o);
      if (st.json) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& i : list) {
          a.push_back({{"name", i.name},
                       {"ref", i.ref},
                       {"manifest_digest", i.manifest_digest},
                       {"config_digest", i.config_digest},
                       {"size", i.size},
                       {"created", i.created},
                       {"path", i.dir},
                       {"source", i.site.empty() ? "store" : "site"}});
          if (!i.site.empty()) a.back().update({{"site", i.site}, {"digest", i.file_digest}});
        }
        std::cout << a.dump(2) << "\n";
        return 0;
      }
      // The ID is the config digest, as docker's IMAGE ID: every image has
      // one, pulled, imported or converted (a manifest digest only some).
      size_t width = 4;
      for (const auto& i : list) width = std::max(width, i.name.size());
      const int w = static_cast<int>(width);
      // A site store's image (its file's digest for the ID) says where it is.
      std::printf("%-*s  %-12s  %10s  %-20s  %s\n", w, "NAME", "ID", "SIZE", "CREATED", "SOURCE");
      for (const auto& i : list) {
        char size[32];
        std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(i.size) / 1e6);
        const std::string& digest = i.site.empty() ? i.config_digest : i.file_digest;
        const std::string id = digest.starts_with("sha256:") ? digest.substr(7, 12) : digest;
        const std::string source = i.site.empty() ? "store" : "site " + i.site;
        std::printf("%-*s  %-12s  %10s  %-20s  %s\n", w, i.name.c_str(), id.c_str(), size, i.created.c_str(),
                    source.c_str());
      }
      return 0;
    });
    c.app->add_flag("--json", s->json, "print JSON");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
      std::string name, section;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(
        app, "inspect", "print what the store knows of an image, or what a SIF file holds, as JSON", s, [](S& st) {
          if (!st.section.empty()) {
            auto text = inspect_section(st.name, st.section, st.o);
            if (!text) {
              std::fprintf(stderr, "rt: image `%s` has no %s\n", st.name.c_str(), st.section.c_str());
              return st.section == "help" ? 0 : 1;
            }
            std::cout << *text;
            return 0;
          }
          struct stat file;
          if (image_is_path(st.name, st.o) && ::stat(st.name.c_str(), &file) == 0 && S_ISREG(file.st_mode)) {
            std::cout << inspect_sif(st.name);
            return 0;
          }
          auto i = inspect_image(st.name, st.o);
          std::cout << "{\n  \"name\": " << json_escape(i.name) << ",\n  \"ref\": " << json_escape(i.ref)
                    << ",\n  \"manifest_digest\": " << json_escape(i.manifest_digest)
                    << ",\n  \"config_digest\": " << json_escape(i.config_digest) << ",\n  \"size\": " << i.size
                    << ",\n  \"created\": " << json_escape(i.created) << ",\n  \"path\": " << json_escape(i.dir);
          std::cout << ",\n  \"source\": \"" << (i.site.empty() ? "store" : "site") << "\"";
          if (!i.site.empty())
            std::cout << ",\n  \"site\": " << json_escape(i.site) << ",\n  \"digest\": " << json_escape(i.file_digest);
          if (!i.base_name.empty())
            std::cout << ",\n  \"base\": {\"name\": " << json_escape(i.base_name)
                      << ", \"config_digest\": " << json_escape(i.base_digest) << "}";
          if (!i.policy.empty()) std::cout << ",\n  \"policy\": " << i.policy;
          // The image's own settings; User is shown though rt runs programs as the caller.
          if (!i.config.empty()) {
            std::string cfg = i.config;
            for (size_t at = cfg.find('\n'); at != std::string::npos; at = cfg.find('\n', at + 3))
              cfg.insert(at + 1, "  ");
            std::cout << ",\n  \"config\": " << cfg;
          }
          std::cout << "\n}\n";
          return 0;
        });
    c.app
        ->add_option("--section", s->section,
                     "print one of Apptainer's files instead: deffile, labels, runscript, startscript, test, help or "
                     "environment")
        ->type_name("SECTION");
    c.app->add_option("name", s->name, "image name, or a SIF file")->required()->type_name("NAME|FILE.sif");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      VerifyOptions o;
      std::string file;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "verify", "check a SIF file's signatures (Apptainer's) against the keys given", s,
                        [](S& st) {
                          for (const auto& line : verify_sif(st.file, st.o))
                            if (!st.common.quiet) std::printf("%s\n", line.c_str());
                          if (!st.common.quiet) std::printf("`%s`: verified\n", st.file.c_str());
                          return 0;
                        });
    c.app->add_option("-k,--key", s->o.keys, "an OpenPGP public key (armoured or binary) to trust; repeatable")
        ->type_name("FILE");
    c.app->add_option("--gpg-home", s->o.gpg_homes, "trust every public key of this GnuPG home; repeatable")
        ->type_name("DIR");
    c.app->add_flag("--legacy-insecure", s->o.legacy,
                    "accept legacy signatures (Singularity 3.5 and older: data only, no header or descriptors)");
    c.app->add_option("file", s->file, "the SIF file")->required()->type_name("FILE.sif");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      SignOptions o;
      std::string file;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "sign", "add an OpenPGP signature of every object group to a SIF file, as Apptainer does",
                        s, [](S& st) {
                          for (const auto& line : sign_sif(st.file, st.o))
                            if (!st.common.quiet) std::printf("%s\n", line.c_str());
                          return 0;
                        });
    c.app
        ->add_option("-k,--key", s->o.key,
                     "the OpenPGP secret key to sign with (its passphrase: $RT_SIGN_PASSPHRASE, else asked on the "
                     "terminal)")
        ->required()
        ->type_name("FILE");
    c.app->add_option("--fingerprint", s->o.fingerprint, "which key of FILE, when it holds several")->type_name("FPR");
    c.app->add_option("file", s->file, "the SIF file, signed in place")->required()->type_name("FILE.sif");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      KeyGenerateOptions o;
    };
    auto s = std::make_shared<S>();
    CLI::App* gen = nullptr;
    Command c = make_with_sub<S>(
        app, "key", "make signing keys", "generate",
        "make a sigstore key pair, PREFIX.private and PREFIX.pub (as skopeo generate-sigstore-key)", gen, s,
        [](S& st) {
          auto [priv, pub] = generate_key(st.o);
          if (!st.common.quiet) std::printf("private key `%s`, public key `%s`\n", priv.c_str(), pub.c_str());
          return 0;
        });
    gen->add_option("--output-prefix", s->o.output_prefix, "write PREFIX.private and PREFIX.pub (neither may exist)")
        ->required()
        ->type_name("PREFIX");
    gen->add_option("--passphrase-file", s->o.passphrase_file,
                    "the private key's passphrase is FILE's first line (default: $RT_SIGN_PASSPHRASE, else asked)")
        ->type_name("FILE");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
      std::string dir;
    };
    auto s = std::make_shared<S>();
    CLI::App* index = nullptr;
    Command c = make_with_sub<S>(
        app, "site-store", "for administrators: a read-only image store every user's rt searches", "index",
        "(re)write DIR/index.json: name, file, format, size and digest of DIR's SquashFS and SIF files", index, s,
        [](S& st) {
          for (const auto& line : index_site_store(st.dir, st.o))
            if (!st.common.quiet) std::printf("%s\n", line.c_str());
          return 0;
        });
    index->add_option("dir", s->dir, "the site store's directory")->required()->type_name("DIR");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
      std::vector<std::string> names;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "rm", "remove images from the store", s, [](S& st) {
      for (const auto& n : st.names) remove_image(n, st.o);
      return 0;
    });
    c.app->add_option("names", s->names, "image names")->required()->type_name("NAME");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(
        app, "prune",
        "remove the build cache, cached blobs no image uses, debris of interrupted runs and dead instances", s,
        [](S& st) {
          const PruneReport r = prune_store(st.o);
          if (!st.common.quiet) {
            auto count = [](size_t n, const char* one, const char* many) {
              return std::to_string(n) + " " + (n == 1 ? one : many);
            };
            std::printf("removed %s, %s, %s (%.1f MB), %s (%.1f kB), %s, %s, %s; freed %.1f MB\n",
                        count(r.build_cache, "cached build step", "cached build steps").c_str(),
                        count(r.run_caches, "RUN cache", "RUN caches").c_str(),
                        count(r.blobs, "unused blob", "unused blobs").c_str(), static_cast<double>(r.blob_bytes) / 1e6,
                        count(r.facts, "stale SquashFS record", "stale SquashFS records").c_str(),
                        static_cast<double>(r.fact_bytes) / 1e3,
                        count(r.debris, "piece of interrupted work", "pieces of interrupted work").c_str(),
                        count(r.instances, "dead instance", "dead instances").c_str(),
                        count(r.staged, "ended job's staged images", "ended jobs' staged images").c_str(),
                        static_cast<double>(r.freed()) / 1e6);
          }
          return 0;
        });
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      OverlayCreateOptions o;
      std::string file;
    };
    auto s = std::make_shared<S>();
    CLI::App* create = nullptr;
    Command c = make_with_sub<S>(app, "overlay", "make overlay images: ext3 files that keep a container's writes", "create",
                                 "make FILE, an ext3 overlay image for rt exec --overlay FILE (Apptainer's format)",
                                 create, s, [](S& st) {
                                   overlay_create(st.file, st.o);
                                   return 0;
                                 });
    create->add_option("-s,--size", s->o.size_mib, "its size in MiB (default 64)")->type_name("MiB");
    create->add_flag("--sparse", s->o.sparse, "allocate its blocks as they are written, not at once");
    create->add_option("--create-dir", s->o.dirs, "make DIR in it (as /DIR in the container); repeatable")
        ->type_name("DIR");
    create->add_option("file", s->file, "the image file to make (refused if it exists)")->required()->type_name("FILE");
    out.push_back(std::move(c));
  }
  {
    using S = JsonState;
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "doctor", "check whether rt can run containers here, and what it will find", s, [](S& st) {
      auto checks = doctor(st.o);
      bool failed = false;
      nlohmann::json report = nlohmann::json::array();
      for (const auto& ch : checks) {
        failed = failed || ch.status == DoctorCheck::Status::Fail;
        const char* word = ch.status == DoctorCheck::Status::Ok     ? "ok"
                           : ch.status == DoctorCheck::Status::Warn ? "warn"
                                                                    : "fail";
        if (st.json) {
          report.push_back({{"check", ch.name}, {"status", word}, {"detail", ch.detail}, {"fix", ch.fix}});
          continue;
        }
        const char* mark = ch.status == DoctorCheck::Status::Ok     ? "\u2714"
                           : ch.status == DoctorCheck::Status::Warn ? "!"
                                                                    : "\u2718";
        std::printf("%s %s: %s\n", mark, ch.name.c_str(), ch.detail.c_str());
        if (!ch.fix.empty()) std::printf("    fix: %s\n", ch.fix.c_str());
      }
      if (st.json) std::printf("%s\n", report.dump(2).c_str());
      return failed ? 1 : 0;
    });
    c.app->add_flag("--json", s->json, "print the checks as JSON");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
      std::string registry, user;
      bool password_stdin = false;
      LoginOptions login;
      bool no_check = false;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "login", "save registry credentials in ~/.docker/config.json", s, [](S& st) {
      if (st.user.empty()) throw Error("rt login needs -u USER");
      if (!st.password_stdin) throw Error("rt login reads the password from standard input: add --password-stdin");
      std::string pw;
      std::getline(std::cin, pw);
      if (pw.empty()) throw Error("no password on standard input");
      st.login.check = !st.no_check;
      std::string reg = login(st.registry, st.user, pw, st.login);
      if (!st.common.quiet) std::printf("saved credentials for %s\n", reg.c_str());
      return 0;
    });
    c.app->add_option("-u,--username", s->user, "user name")->type_name("USER");
    c.app->add_flag("--password-stdin", s->password_stdin, "read the password from standard input");
    add_registry_options(c.app, s->login.ca_file, s->login.insecure, s->login.plain_http);
    c.app->add_flag("--no-check", s->no_check, "save without asking the registry first");
    c.app->add_option("registry", s->registry, "registry host[:port], e.g. ghcr.io")->required()->type_name("REGISTRY");
    out.push_back(std::move(c));
  }
  {
    struct S {
      Common common;
      StoreOptions o;
      std::string registry;
      bool all = false;
    };
    auto s = std::make_shared<S>();
    Command c = make<S>(app, "logout", "remove saved registry credentials from ~/.docker/config.json", s, [](S& st) {
      if (st.all == !st.registry.empty()) throw Error("rt logout needs a REGISTRY or --all (not both)");
      const auto removed = logout(st.registry);
      if (!st.common.quiet) {
        if (removed.empty()) std::printf("no saved credentials\n");
        for (const auto& key : removed) std::printf("removed credentials for %s\n", key.c_str());
      }
      return 0;
    });
    c.app->add_flag("--all", s->all, "remove the credentials of every registry");
    c.app->add_option("registry", s->registry, "registry host[:port], e.g. ghcr.io")->type_name("REGISTRY");
    out.push_back(std::move(c));
  }
}

}  // namespace rt::cli

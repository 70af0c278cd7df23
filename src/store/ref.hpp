// Image references: [docker://][REGISTRY/]REPOSITORY[:TAG][@DIGEST] (pure).
#pragma once
#include <string>
#include <string_view>

namespace rt::store {

struct Reference {
  std::string registry;    // "docker.io", "ghcr.io", "127.0.0.1:5000"
  std::string repository;  // "library/ubuntu"
  std::string tag;         // "latest" unless a digest alone was given
  std::string digest;      // "sha256:..." or empty

  // Canonical text: registry/repository[:tag][@digest].
  std::string str() const;
  // Host (and port) that serves the registry API: Docker Hub's differs.
  std::string api_host() const;
  // What a manifest request asks for: the digest if any, else the tag.
  std::string manifest_ref() const { return digest.empty() ? tag : digest; }
};

// Docker's defaults: "ubuntu" is docker.io/library/ubuntu:latest. The first
// component is a registry when it has a "." or ":" or is "localhost".
// Throws rt::Error on malformed references.
Reference parse_reference(std::string_view text);

}  // namespace rt::store

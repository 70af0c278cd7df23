// An image as a config and its layers, whatever it comes from (a
// registry, an archive, a tree): what the writers (the tree writer, the
// SquashFS flattener) take (host).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image/unpack.hpp"

namespace rt::image {

struct LayerInput {
  std::string name;              // for messages: a digest or a file name
  std::string expected_blob;     // digest of the (compressed) blob; empty: unchecked
  int64_t expected_size = -1;    // size of the blob; -1: unchecked
  std::string expected_diff_id;  // digest of the uncompressed tar; empty: unchecked
  std::function<ReadFn()> open;  // a fresh reader of the blob's bytes
};

struct ImageSource {
  std::string name;         // store name
  std::string ref;          // where it came from, for rt images
  std::string config_text;  // the OCI image config, stored verbatim
  std::string config_digest;
  std::string manifest_digest;  // may be empty
  std::vector<LayerInput> layers;
  std::vector<std::string> drop;  // top-level names removed from the tree at the end
  uint64_t bytes_hint = 0;        // about the layers' bytes when their sizes are unknown (an archive's), for progress
  std::string base_name, base_digest;  // rt build: what FROM named and its config digest
  std::string admission;               // rt pull: what the trust policy admitted it by (a JSON object); "": nothing judged
  // One layer made from a tree: what it was made from (a file's path,
  // inode, size and times), so that its compressed form can be found
  // again; empty: none.
  std::string tree_stamp;
};

}  // namespace rt::image

// Image references as users write them: REGISTRY/REPO[:TAG|@DIGEST].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "util/digest.hpp"

namespace sb::registry {

struct Reference {
  std::string registry;    // "127.0.0.1:5000", "ghcr.io", "registry-1.docker.io"
  std::string repository;  // "team/pytorch", "library/debian"
  std::string tag;         // empty when not given
  std::optional<Digest> digest;

  // "ghcr.io/a/b:1", "localhost:5000/b@sha256:...", "debian" (Docker Hub).
  // Throws sb::Error (exit 2) on a malformed reference.
  static Reference parse(const std::string& text);
  std::string name() const { return registry + "/" + repository; }  // for messages
  std::string str() const;  // name plus :tag and/or @digest
  // The tag or digest to ask the registry for ("latest" when neither was given).
  std::string selector() const;
};

// Whether `t` is a tag: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}.
bool valid_tag(const std::string& t);

// Whether plain HTTP may be used for `registry` (HOST[:PORT]): localhost,
// 127.0.0.1 and [::1], and the registries named in `insecure`.
bool is_local(const std::string& registry);
bool listed(const std::string& registry, const std::vector<std::string>& insecure);

}  // namespace sb::registry

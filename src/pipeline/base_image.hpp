// A recipe's base image (`from:` at the top of a recipe): pulled from a
// registry, or read from a local OCI layout, into the store with every
// digest checked. Its layers become the bottom of the image, its config is
// what the recipe's `config:` overrides, its history is kept, and its
// manifest digest starts the chain of layer cache keys, so a different base
// rebuilds every layer above it.
//
//   from: registry.example.com/team/cuda-base:12.6            a tag: resolved now
//   from: localhost:5000/cuda-base@sha256:...                  a pinned digest
//   from: oci:vendor/cuda-layout:12.6                          a local OCI layout (ref name 12.6)
//
// A tag is resolved to a digest at build time and reported; `stackbuild lock`
// records it, and `build --locked` builds from the recorded digest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "image/image.hpp"
#include "pipeline/plan.hpp"
#include "recipe/recipe.hpp"
#include "registry/session.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb {

struct BaseImageOptions {
  registry::SessionOptions session;  // --creds, --ca-cert, --insecure-registry
  int jobs = 3;                      // blobs fetched at once
  // --locked: the lockfile's "base" object of this point (JSON, see lock_base_image);
  // "" = resolve the reference now.
  std::string locked;
};

struct BaseImage {
  BaseImage(std::string ref_, Digest digest_, Digest manifest_, std::string pinned_)
      : ref(std::move(ref_)), digest(digest_), manifest(manifest_), pinned(std::move(pinned_)) {}
  std::string ref;        // as the recipe wrote it (after ${vars})
  Digest digest;          // what the reference names: an index's or a manifest's digest
  Digest manifest;        // the manifest of the recipe's platform
  std::string pinned;     // ref with @digest, for messages and results
  std::vector<Layer> layers;           // bottom first, OCI media types
  std::vector<HistoryEntry> history;   // the base's, one per layer plus empty_layer entries
  ImageConfig config;                  // the base's env, entrypoint, cmd, workdir, user, labels, ...

  // The parent key of the recipe's first layer: the manifest digest.
  Digest cache_key() const;
};

// The recipe's base image, in the store; nothing when the recipe has no `from:`.
// A digest the store has seen needs no registry. Errors name the recipe's `from:` line.
std::optional<BaseImage> load_base_image(const Recipe& instantiated, const Store& store, const BaseImageOptions& options,
                                         Status& status);

// The recipe's config over the base's: env by name (the recipe's win, new ones
// follow), entrypoint, cmd, workdir, user, stop signal when the recipe sets
// them (a new entrypoint drops the base's cmd, as in a Dockerfile), labels
// merged, ports added.
ImageConfig inherit_config(const ImageConfig& base, const ImageConfig& recipe, const Recipe& instantiated);

// For `stackbuild lock`: {"from": REF, "digest": "sha256:..."} for the recipe's
// base (null without `from:`); a tag is resolved against the registry, no blobs fetched.
nlohmann::json lock_base_image(const Recipe& instantiated, const registry::SessionOptions& session, Status& status);

// lock_base_image() for each point of the plan (`which`: those flagged;
// empty: all), joined into `extras` as "base".
void add_base_lock_extras(const Planned& planned, std::vector<nlohmann::json>& extras,
                          const registry::SessionOptions& session, Status& status, const std::vector<bool>& which = {});

// --locked: the lockfile's "base" object for `point` as JSON text, "" when the
// recipe has no `from:`; throws when the recipe has one and the lock pins none.
std::string locked_base(const Planned& planned, const resolve::PlanPoint& point);

}  // namespace sb

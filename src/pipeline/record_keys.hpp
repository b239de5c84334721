// Internal to pipeline/: keys of the store records a layer carries besides
// its blob, for the kinds that write them and the registry cache that moves
// them (registry_cache.cpp), without one including the other.
#pragma once

#include "util/digest.hpp"

namespace sb {

// The key of the "apt-state" record (the dpkg state an image has after a
// layer, as the next apt layer starts from it) of the layer with `diff_id`.
inline Digest apt_state_key(const Digest& diff_id) {
  return KeyHasher().field("diff_id", diff_id.str()).finish();
}

}  // namespace sb

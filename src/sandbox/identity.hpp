// Internal to sandbox/: who the sandbox's root is on the host.
//
// As root, stackbuild never runs foreign code as the host's root: the sandbox
// is a user namespace whose ids 0..count-1 are a range of unprivileged host
// ids, root's subordinate range in /etc/subuid and /etc/subgid where those
// name one, else a fixed range (kDefaultRange: 65536 ids from 0x70000000,
// above the ranges systemd and useradd hand out). The sandbox's directories
// are idmapped mounts (mount_setattr(MOUNT_ATTR_IDMAP)) through a namespace
// with the same map, so what a step writes keeps the image's owners on disk
// and the layers are what they were without a user namespace.
// STACKBUILD_SANDBOX_USERNS=off is the weaker mode: the host's root, for
// kernels without user namespaces or idmapped mounts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "sandbox/setup_plan.hpp"

namespace sb::sandbox::detail {

struct IdRange {
  uint32_t uid = 0, gid = 0;  // the host ids of the sandbox's 0
  uint32_t count = 0;
};

inline constexpr IdRange kDefaultRange{0x70000000u, 0x70000000u, 65536};

// The identity this process's sandboxes get (throws sb::Error for a bad
// STACKBUILD_SANDBOX_USERNS).
Identity identity();

// Root's range from subuid/subgid files (the first line for "root" or "0"
// in each, with at least 1 id; at most 65536 are used), or kDefaultRange
// when either names none.
IdRange root_id_range(const fs::path& subuid = "/etc/subuid", const fs::path& subgid = "/etc/subgid");

// One line of a subuid/subgid file for `user` (a name or a number): start and count.
std::optional<std::pair<uint32_t, uint32_t>> subid_range(const std::string& text,
                                                           const std::string& user,
                                                           const std::string& uid);

// "0 START COUNT\n" for uid_map or gid_map.
std::string id_map_line(uint32_t start, uint32_t count);

// A user namespace with `range`'s map, for idmapped mounts: made once per
// process and kept (its fd is close-on-exec). Throws sb::Error.
int idmap_userns(const IdRange& range);

// A detached mount of `source` (open_tree), recursive, idmapped through
// `userns` when `idmap`, read-only when asked. Throws sb::Error naming the
// path and, for idmapping, the weaker mode.
int detached_mount(const fs::path& source, bool idmap, bool read_only, int userns);

}  // namespace sb::sandbox::detail

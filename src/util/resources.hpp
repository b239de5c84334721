// What this machine (or the container it runs in) gives the process: cores
// and memory, as limits on work that runs at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sb {

// CPUs this process may run on (its affinity mask; a cgroup's cpu.max quota
// when lower), at least 1.
unsigned usable_cores();

// Bytes of memory that can still be used: /proc/meminfo's MemAvailable, or a
// cgroup v2 memory.max less memory.current when lower. nullopt when neither
// can be read.
std::optional<uint64_t> available_memory();

// For tests: the same from given texts of /proc/meminfo, memory.max and
// memory.current ("" when absent).
std::optional<uint64_t> available_memory_from(const std::string& meminfo, const std::string& cgroup_max,
                                              const std::string& cgroup_current);

}  // namespace sb

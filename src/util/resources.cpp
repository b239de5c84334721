#include "util/resources.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

#include "util/file.hpp"
#include "util/number.hpp"

namespace sb {

namespace {

// /proc/self/cgroup's v2 line "0::/path": the cgroup's directory.
std::string cgroup_dir() {
  std::istringstream in(read_file_or_empty("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + (line.size() > 3 && line.substr(3) != "/" ? line.substr(3) : "");
  return "";
}

std::optional<uint64_t> first_number(const std::string& text) {
  std::string word;
  std::istringstream(text) >> word;
  return parse_integer<uint64_t>(word);
}

}  // namespace

unsigned usable_cores() {
  unsigned n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = static_cast<unsigned>(CPU_COUNT(&set));
  if (n == 0) n = std::thread::hardware_concurrency();
  std::string dir = cgroup_dir();
  if (!dir.empty()) {
    // cpu.max: "QUOTA PERIOD" or "max PERIOD".
    std::istringstream in(read_file_or_empty(dir + "/cpu.max"));
    std::string quota, period;
    in >> quota >> period;
    auto q = parse_integer<uint64_t>(quota), p = parse_integer<uint64_t>(period);
    if (q && p && *p > 0)
      n = std::min(n ? n : ~0u, static_cast<unsigned>(std::max<double>(1, std::ceil(static_cast<double>(*q) / *p))));
  }
  return std::max(1u, n);
}

std::optional<uint64_t> available_memory_from(const std::string& meminfo, const std::string& cgroup_max,
                                              const std::string& cgroup_current) {
  std::optional<uint64_t> avail;
  std::istringstream in(meminfo);
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") avail = kib * 1024;
  }
  auto max = first_number(cgroup_max), current = first_number(cgroup_current);
  if (max) {
    uint64_t left = current && *current < *max ? *max - *current : 0;
    avail = avail ? std::min(*avail, left) : left;
  }
  return avail;
}

std::optional<uint64_t> available_memory() {
  std::string dir = cgroup_dir();
  return available_memory_from(read_file_or_empty("/proc/meminfo"),
                               dir.empty() ? "" : read_file_or_empty(dir + "/memory.max"),
                               dir.empty() ? "" : read_file_or_empty(dir + "/memory.current"));
}

}  // namespace sb

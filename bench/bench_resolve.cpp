// Resolves 10,000 generated matrix points against the real catalog and prints
// the time: planning a large matrix must take well under a second.
//
//   bench_resolve [layers-dir] [points]
//   bench_resolve --smoke     (200 points: that it runs and prints, for the test run)
//
// Points mix pinned and unpinned frameworks, CUDA minors, Pythons, OSes and
// arch lists, so both the quick successes and the backtracking conflicts
// (e.g. CUDA 13 with arch 7.0) are measured. The stream is deterministic.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "resolve/resolve.hpp"

#ifndef SB_SOURCE_DIR
#define SB_SOURCE_DIR "."
#endif

namespace {

struct Lcg {  // deterministic, so runs compare
  uint64_t state = 0x9e3779b97f4a7c15ull;
  size_t next(size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33) % n;
  }
};

std::vector<sb::resolve::Request> make_points(size_t count) {
  const std::vector<std::string> frameworks = {"pytorch", "pytorch", "pytorch", "tensorflow"};
  const std::vector<std::string> pytorch = {"",    "2.1",  "2.4",  "2.5",  "2.6",  "2.7", "2.8",
                                            "2.9", "2.10", "2.11", "2.12", "2.13", "2.14"};
  const std::vector<std::string> tensorflow = {"", "2.12", "2.15", "2.17", "2.19", "2.21"};
  const std::vector<std::string> cuda = {"",     "",     "11.8", "12.1", "12.4",      "12.6",
                                         "12.8", "12.9", "13.0", "13.2", ">=12.0,<13"};
  const std::vector<std::string> python = {"", "", "3.10", "3.11", "3.12", "3.13", "3.14"};
  const std::vector<std::string> os = {"", "bookworm", "trixie", "jammy", "noble"};
  const std::vector<std::vector<std::string>> arch = {
      {}, {"8.0", "9.0"}, {"7.0", "8.0"}, {"9.0", "10.0", "12.0+PTX"}, {"7.5", "8.6", "8.9"}};

  Lcg rng;
  std::vector<sb::resolve::Request> points;
  for (size_t i = 0; i < count; ++i) {
    sb::resolve::Request r;
    sb::SourceLocation at{"bench.yaml", 1, 1};
    const std::string& fw = frameworks[rng.next(frameworks.size())];
    const auto& fw_versions = fw == "pytorch" ? pytorch : tensorflow;
    r.wants.push_back({fw, fw_versions[rng.next(fw_versions.size())], at});
    r.wants.push_back({"cuda", cuda[rng.next(cuda.size())], at});
    r.wants.push_back({"python", python[rng.next(python.size())], at});
    r.wants.push_back({"os", os[rng.next(os.size())], at});
    if (fw == "pytorch") r.wants.push_back({"nccl", "", at});
    r.wants.push_back({"cublas", "", at});
    r.arch = arch[rng.next(arch.size())];
    r.arch_where = at;
    points.push_back(std::move(r));
  }
  return points;
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::string(argv[1]) == "--smoke";
  std::string dir = argc > 1 && !smoke ? argv[1] : SB_SOURCE_DIR "/layers";
  size_t count = smoke ? 200 : argc > 2 ? std::stoul(argv[2]) : 10000;
  try {
    auto t0 = std::chrono::steady_clock::now();
    sb::catalog::Catalog catalog = sb::catalog::load_catalog(dir);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<sb::resolve::Request> points = make_points(count);

    size_t solved = 0, conflicts = 0;
    auto t2 = std::chrono::steady_clock::now();
    for (const auto& p : points) {
      sb::resolve::Result r = sb::resolve::resolve_point(catalog, p);
      r.stack ? ++solved : ++conflicts;
    }
    auto t3 = std::chrono::steady_clock::now();

    using ms = std::chrono::duration<double, std::milli>;
    double total = ms(t3 - t2).count();
    std::printf("catalog load: %.2f ms\n", ms(t1 - t0).count());
    std::printf("resolved %zu points (%zu stacks, %zu conflicts) in %.2f ms: %.2f us/point\n",
                count, solved, conflicts, total, total * 1000.0 / static_cast<double>(count));
    return 0;
  } catch (const sb::Error& e) {
    std::fprintf(stderr, "bench_resolve: error: %s\n", e.render().c_str());
    return 1;
  }
}

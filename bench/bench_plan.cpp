// Plans a generated recipe of 10,000 matrix points against the full catalog
// and prints the time: reading the recipe, loading the catalog, expanding the
// matrix, resolving every point and expanding every tag must take well under
// a second.
//
//   bench_plan [layers-dir]
//   bench_plan --smoke     (the first two values of each axis, 32 points, no bar:
//                           that it runs and prints, for the test run)
//
// The matrix is 10 CUDA x 10 PyTorch x 5 Python x 4 OS x 5 arch lists, so it
// holds both resolvable points and conflicts of every kind (PyTorch without a
// build for the CUDA, Python out of range, arch dropped by CUDA 13).
#include <chrono>
#include <cstdio>
#include <string>

#include "pipeline/plan.hpp"
#include "util/file.hpp"

#ifndef SB_SOURCE_DIR
#define SB_SOURCE_DIR "."
#endif

namespace {

const char* const kMatrix = R"(matrix:
  cuda: ["11.8", "12.1", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0", "13.1", "13.2"]
  pytorch: ["2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14"]
  python: ["3.10", "3.11", "3.12", "3.13", "3.14"]
  os: [bookworm, trixie, jammy, noble]
  arch: [["8.0", "9.0"], ["7.0", "8.0"], ["9.0", "10.0", "12.0+PTX"], ["7.5", "8.6", "8.9"], ["8.0"]]
)";
const char* const kSmokeMatrix = R"(matrix:
  cuda: ["12.6", "12.8"]
  pytorch: ["2.7", "2.8"]
  python: ["3.11", "3.12"]
  os: [bookworm, noble]
  arch: [["8.0", "9.0"], ["7.0", "8.0"]]
)";
const char* const kLayers = R"(layers:
  - {name: os, use: os, version: "${os}"}
  - {name: cuda, use: cuda, version: "${cuda}", components: [cudart, cublas]}
  - {name: dllibs, use: [cudnn, nccl, cublas]}
  - {name: fw, use: pytorch, version: "${pytorch}", from: source,
     build: {env: {TORCH_CUDA_ARCH_LIST: "${arch}"}, run: ["python3 setup.py bdist_wheel"]}}
tags: ["bench:${pytorch}-cuda${cuda}-py${python}-${os}-${arch}"]
)";

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::string(argv[1]) == "--smoke";
  sb::fs::path layers = argc > 1 && !smoke ? argv[1] : SB_SOURCE_DIR "/layers";
  sb::TempDir tmp;
  sb::write_file_atomic(tmp.path() / "bench.yaml",
                        std::string("stack: bench\nrelease: \"1\"\n") + (smoke ? kSmokeMatrix : kMatrix) + kLayers);
  try {
    auto start = std::chrono::steady_clock::now();
    sb::Recipe recipe = sb::load_recipe(tmp.path() / "bench.yaml");
    sb::Planned p = sb::plan_recipe(recipe, sb::PlanOptions{layers, {}});
    double total = since(start);
    auto again = std::chrono::steady_clock::now();
    sb::Planned q = sb::plan_recipe(recipe, sb::PlanOptions{layers, {}});
    double second = since(again);
    size_t bad = p.plan.unsatisfiable();
    printf("plan: %zu points (%zu resolved, %zu unsatisfiable) in %.3f s (again: %.3f s); bar: 1 s -> %s\n",
           p.plan.points.size(), p.plan.points.size() - bad, bad, total, second, total < 1.0 ? "ok" : "TOO SLOW");
    if (smoke) return q.plan.points.size() == 32 ? 0 : 1;
    return q.plan.points.size() == 10000 && total < 1.0 ? 0 : 1;
  } catch (const sb::Error& e) {
    fprintf(stderr, "bench_plan: %s\n", e.render().c_str());
    return 1;
  }
}

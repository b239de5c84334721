// `stackbuild cluster github|gitlab|k8s`: a release's matrix fanned out on
// another engine, as files generated from Mustache templates
// (templates/ci/, built in; users fork them with --templates DIR). Every
// engine runs the same two commands: per point, `stackbuild build RECIPE
// --locked --only K=V... --push-to REGISTRY/REPO`, and once after them
// `stackbuild merge`, which assembles the release reading only the registry.
//
// What the files carry comes from the recipe and the command line, and all of
// it is written into YAML and shell: every string must be made of
// [A-Za-z0-9._+,:@/=-] (matrix values may also hold ';', arch lists) or the
// generation stops naming it, so nothing in a recipe can inject shell or YAML.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/release.hpp"

namespace sb {

struct ClusterOptions {
  std::string recipe;                  // the recipe's path as the tasks see it (relative to the checkout)
  std::string registry;                // REGISTRY/REPO the points are pushed to
  std::optional<std::string> cache;    // REGISTRY/REPO: --cache-from and --cache-to of every task
  std::vector<std::string> only;       // --only: the points to fan out (all when empty)
  std::vector<std::string> sets;       // --set: passed on to every task
  std::string stackbuild = "stackbuild";  // the command the tasks run
  std::string image;                   // the container image with stackbuild (k8s: required)
  std::string runner = "ubuntu-latest";   // GitHub's runs-on
  std::string workdir = "/work";       // k8s: the checkout in the image
  int timeout_minutes = 360;           // per point
  bool sbom = true;                    // build --sbom
};

// One point of the fan-out: its index, its id, the --only values that select
// it alone (its matrix keys, as plan_release() found them), its tag.
struct ClusterPoint {
  size_t index = 0;
  std::string id;
  std::vector<std::string> only;  // KEY=VALUE
  std::string tag;
};

// The release's points as the files name them. Throws Error(ErrorKind::Input)
// for a matrix key or value that cannot be written into a CI file safely.
std::vector<ClusterPoint> cluster_points(const Release& release);

// The data the templates are rendered with (docs/cluster.md names it).
nlohmann::json cluster_data(const std::string& stack, const std::vector<ClusterPoint>& points,
                            const ClusterOptions& options);

struct GeneratedFile {
  std::string name;  // relative to the output directory
  std::string text;
};

// The engine's files ("github", "gitlab", "k8s"), rendered from the built-in
// templates or from `templates` (a directory with forks of templates/ci/).
std::vector<GeneratedFile> generate_ci(const std::string& engine, const nlohmann::json& data,
                                       const std::optional<std::filesystem::path>& templates);

// The engines generate_ci() knows.
const std::vector<std::string>& ci_engines();

}  // namespace sb

// stackbuild cluster github|gitlab|k8s: a release's matrix as another
// engine's files (pipeline/cluster_ci.hpp).
#include <cstdio>

#include "cli/cli.hpp"
#include "cli/exit_codes.hpp"
#include "pipeline/cluster_ci.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/release.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

const char* const kClusterHelp =
    "usage: stackbuild cluster github|gitlab|k8s RECIPE.yaml --registry REGISTRY/REPO [options]\n"
    "       stackbuild cluster slurm RECIPE.yaml --registry REGISTRY/REPO [options]\n"
    "\n"
    "slurm submits the release to a Slurm cluster itself (see 'stackbuild cluster slurm --help').\n"
    "Fans a release out over another engine: writes its files, in which one task per matrix\n"
    "point runs\n"
    "    stackbuild build RECIPE --locked --no-index --record-inputs --sbom --push-to REGISTRY/REPO\n"
    "                         --only KEY=VALUE...\n"
    "and, once they all succeeded, one task runs\n"
    "    stackbuild merge RECIPE --locked --sbom --registry REGISTRY/REPO -o release-notes.md\n"
    "which assembles the release (the matrix index, the release notes) reading only the\n"
    "registry. The tasks share nothing but the registry. docs/cluster.md explains the files.\n"
    "  github   stackbuild-STACK.yml: a GitHub Actions workflow (a matrix job, a merge job)\n"
    "  gitlab   .gitlab-ci.yml: a GitLab CI file (parallel:matrix, then a release stage)\n"
    "  k8s      k8s-points.yaml (an Indexed Job, one index per point) and k8s-release.yaml\n"
    "           (the merge Job), for kubectl apply\n"
    "The files come from Mustache templates built into stackbuild (templates/ci/); fork them\n"
    "and give --templates DIR. RECIPE is written as given, relative to the repository's root\n"
    "(run this there), and its lockfile must be committed and current: the tasks build --locked.\n"
    "Every value written into the files (paths, names, matrix values) must be made of letters,\n"
    "digits and ._+,:@/=- (matrix values also ';'), or nothing is written.\n"
    "\n"
    "options:\n"
    "  --registry REGISTRY/REPO  where the points and the release are pushed (required)\n"
    "  --cache REGISTRY/REPO     the build cache every task reads and writes (--cache-from/-to)\n"
    "  --only KEY=VALUE          fan out only these points (as build --only)\n"
    "  --set KEY=VALUE           replace matrix.KEY with one value, here and in every task\n"
    "  -o DIR                    where the files go (default: the current directory)\n"
    "  --templates DIR           forks of templates/ci/*.mustache to render instead\n"
    "  --image IMAGE             the container image the tasks run in, holding stackbuild\n"
    "                            (k8s: required, with the checkout at --workdir)\n"
    "  --workdir DIR             k8s: the checkout in --image (default /work)\n"
    "  --runner LABEL            github: runs-on (default ubuntu-latest)\n"
    "  --stackbuild COMMAND      the command the tasks run (default stackbuild)\n"
    "  --timeout MINUTES         a point's time limit (default 360)\n"
    "  --no-sbom                 the tasks push no SBOMs\n"
    "  --catalog DIR             the component catalog (as for plan)\n";

int cmd_cluster(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "slurm") return cmd_cluster_slurm(std::vector<std::string>(argv.begin() + 1, argv.end()));
  std::vector<std::string> flags = kCommonFlags;
  flags.push_back("--no-sbom");
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), kPlanOptions.begin(), kPlanOptions.end());
  options.insert(options.end(), {"--registry", "--cache", "-o", "--templates", "--image", "--workdir", "--runner",
                                 "--stackbuild", "--timeout"});
  Args args(argv, flags, options, {"--set", "--only"});
  if (maybe_help(args, kClusterHelp)) return kExitOk;
  if (args.positional().size() != 2)
    throw Error("cluster wants an engine and one recipe file (see 'stackbuild cluster --help')", ErrorKind::Usage);
  const std::string engine = args.positional()[0];
  ClusterOptions o;
  o.recipe = args.positional()[1];
  auto registry = args.get("--registry");
  if (!registry) throw Error("cluster: --registry REGISTRY/REPO is required: the tasks push there", ErrorKind::Usage);
  o.registry = *registry;
  o.cache = args.get("--cache");
  o.only = args.all("--only");
  o.sets = args.all("--set");
  o.image = args.get("--image").value_or("");
  o.workdir = args.get("--workdir").value_or(o.workdir);
  o.runner = args.get("--runner").value_or(o.runner);
  o.stackbuild = args.get("--stackbuild").value_or(o.stackbuild);
  if (auto t = args.integer("--timeout", 1, 60 * 24 * 30)) o.timeout_minutes = static_cast<int>(*t);
  o.sbom = !args.has("--no-sbom");
  if (engine == "k8s" && o.image.empty())
    throw Error("cluster k8s: --image IMAGE is required (the image the pods run, with stackbuild and the checkout)",
                ErrorKind::Usage);
  std::optional<fs::path> templates;
  if (auto t = args.get("--templates")) templates = fs::path(*t);
  const fs::path out = args.get("-o").value_or(".");

  if (!fs::exists(o.recipe + ".lock"))
    throw Error(o.recipe + ".lock: no lockfile; the tasks build --locked: run 'stackbuild lock " + o.recipe +
                    "' and commit it",
                ErrorKind::Input);
  ReleaseRequest request;  // the points as `cluster slurm` and `merge` plan them: --locked
  request.plan = plan_options(args);
  request.only = o.only;
  Release release = plan_release(load_recipe(o.recipe), request);
  for (const auto& id : release.skipped)
    fprintf(stderr, "cluster %s: warning: point %s is unsatisfiable; no task builds it\n", engine.c_str(), id.c_str());
  auto points = cluster_points(release);
  auto files = generate_ci(engine, cluster_data(release.stack, points, o), templates);
  fs::create_directories(out);
  for (const auto& f : files) {
    write_file_atomic(out / f.name, f.text);
    printf("%s\n", (out / f.name).c_str());
  }
  fprintf(stderr, "cluster %s: %zu point%s of %s, pushed to %s\n", engine.c_str(), points.size(),
          points.size() == 1 ? "" : "s", release.stack.c_str(), o.registry.c_str());
  return kExitOk;
}

}  // namespace sb::cli

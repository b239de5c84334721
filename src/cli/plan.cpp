// `stackbuild plan` and `stackbuild lock`: the matrix of a recipe, resolved.
#include <algorithm>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "pipeline/apt_layer.hpp"
#include "registry/session.hpp"
#include "pipeline/lock.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "resolve/lockfile.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kPlanHelp =
    "usage: stackbuild plan RECIPE.yaml [options]\n"
    "\n"
    "Expands the recipe's matrix and resolves every point against the component catalog:\n"
    "prints a table of points (tag, component versions, driver requirement, compute\n"
    "capabilities), then the points that cannot be satisfied, each with its reasons.\n"
    "Nothing is fetched or built.\n"
    "\n"
    "options:\n"
    "  --set KEY=VALUE    replace matrix.KEY with one value (repeatable); arch takes a list:\n"
    "                     --set arch=8.0,9.0. A KEY that only include: entries give chooses\n"
    "                     the entries with that value, or, when none has it, is set in each one\n"
    "  --only KEY=VALUE   show only the points where ${KEY} is VALUE (repeatable: values of one\n"
    "                     KEY are alternatives, different KEYs must all match), as build --only\n"
    "  --catalog DIR      the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                     beside the recipe or above it, else the built-in one)\n"
    "  --strict           exit 4 when any point is unsatisfiable\n"
    "  --json             print the plan as one JSON document on stdout (instead of the table)\n";

const char* const kLockHelp =
    "usage: stackbuild lock RECIPE.yaml [options]\n"
    "\n"
    "Resolves every matrix point of the recipe and writes RECIPE.yaml.lock beside it: JSON,\n"
    "sorted keys, one resolved stack per point, so changes read well in a diff. The file is\n"
    "replaced atomically; an error leaves the old lockfile as it was. Each point also pins\n"
    "what its apt, pip and redist layers fetch (URL, size, sha256 of every package, wheel and\n"
    "archive), resolved now. 'stackbuild build --locked' fetches exactly those, and refuses\n"
    "to build when the lockfile is missing or stale.\n"
    "Unsatisfiable points are recorded as such (and reported); --strict refuses to write.\n"
    "A recipe's base image (from: REGISTRY/REPO:TAG) is looked up and its digest recorded;\n"
    "build --locked builds from that digest.\n"
    "When a lockfile is there and current for the recipe and catalog, it is left as it is:\n"
    "pins move only with --update (the monthly step) or --only. Otherwise (no lockfile, or\n"
    "the recipe or catalog changed) every point is resolved again. What the new lockfile\n"
    "changes (versions, packages, wheels, archives, sources, the base's digest) is printed\n"
    "before it is replaced.\n"
    "\n"
    "options:\n"
    "  --check            write nothing: exit 0 when RECIPE.yaml.lock is current for the\n"
    "                     recipe and catalog as they are, else exit 3 naming what changed;\n"
    "                     offline (nothing is resolved against a repository or index)\n"
    "  --update           resolve every point again, though the lockfile is current: today's\n"
    "                     versions, packages and wheels (with --only: only those points)\n"
    "  --only KEY=VALUE   lock these points again (repeatable, as for build); the others\n"
    "                     keep their entries, and must still resolve as they say\n"
    "  --set KEY=VALUE    replace matrix.KEY with one value (repeatable)\n"
    "  --catalog DIR      the component catalog (default: $STACKBUILD_CATALOG, else layers/\n"
    "                     beside the recipe or above it, else the built-in one)\n"
    "  --strict           exit 4, writing nothing, when any point is unsatisfiable\n"
    "  --creds USER:PASSWORD, --ca-cert FILE, --insecure-registry HOST[:PORT]\n"
    "                     for looking up a base image (as for push)\n"
    "  --insecure-policy  look it up whatever policy.json says (as for pull)\n";

const std::vector<std::string> kPlanOptions = {"--catalog"};

PlanOptions plan_options(const Args& args) {
  PlanOptions o;
  if (auto c = args.get("--catalog")) o.catalog = fs::path(*c);
  o.sets = args.all("--set");
  return o;
}

namespace {

// The table: one row a resolved point, one column a component.
std::string plan_table(const Planned& planned) {
  const resolve::Plan& plan = planned.plan;
  std::set<std::string> comps;
  for (const auto& p : plan.points)
    if (p.stack)
      for (const auto& [c, v] : p.stack->versions) comps.insert(c);
  // Points that differ only in platform share their tag: a column tells them apart.
  const bool platforms = std::any_of(plan.points.begin(), plan.points.end(),
                                     [](const resolve::PlanPoint& p) { return p.point.get("platform") != nullptr; });
  std::vector<std::string> header{"TAG"};
  if (platforms) header.push_back("PLATFORM");
  for (const auto& c : comps) header.push_back(c);
  header.insert(header.end(), {"DRIVER", "ARCH"});
  std::vector<std::vector<std::string>> rows{header};
  for (const auto& p : plan.points) {
    if (!p.stack) continue;
    std::vector<std::string> row{p.tags.empty() ? p.point.id() : p.tags.front()};
    if (platforms) row.push_back(p.point.get("platform") ? p.point.get("platform")->str() : "-");
    for (const auto& c : comps) {
      auto it = p.stack->versions.find(c);
      row.push_back(it == p.stack->versions.end() ? "-" : it->second);
    }
    row.push_back(p.stack->driver_min.empty() ? "-" : ">=" + p.stack->driver_min);
    std::string arch;
    for (const auto& a : p.stack->arch) arch += (arch.empty() ? "" : ",") + a;
    row.push_back(arch.empty() ? "-" : arch);
    rows.push_back(row);
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  size_t bad = plan.unsatisfiable();
  std::string out = plan.recipe + ": stack " + plan.stack + ", " + std::to_string(plan.points.size()) +
                    (plan.points.size() == 1 ? " point" : " points") + " (" +
                    std::to_string(plan.points.size() - bad) + " resolved, " + std::to_string(bad) +
                    " unsatisfiable)" + (planned.catalog_dir.empty() ? "" : ", catalog " + planned.catalog_dir.string()) +
                    "\n";
  if (rows.size() > 1) {
    out += "\n";
    for (const auto& r : rows) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        std::string cell = i == 0 ? r[i] : "  " + r[i];
        if (i + 1 < r.size()) cell.resize(cell.size() + width[i] - r[i].size(), ' ');
        line += cell;
      }
      out += line + "\n";
    }
  }
  if (bad) out += "\n" + unsatisfiable_report(plan) + "\n";
  return out;
}

}  // namespace

int cmd_plan(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.push_back("--strict");
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), kPlanOptions.begin(), kPlanOptions.end());
  Args args(argv, flags, options, {"--set", "--only"});
  if (maybe_help(args, kPlanHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("plan wants one recipe file (see 'stackbuild plan --help')", ErrorKind::Usage);
  Planned planned = plan_recipe(load_recipe(args.positional()[0]), plan_options(args));
  if (auto only = args.all("--only"); !only.empty()) {  // the chosen points, as build --only chooses them
    std::vector<resolve::PlanPoint> chosen;
    for (size_t i : select_points(planned.recipe, planned.plan, only)) chosen.push_back(planned.plan.points[i]);
    planned.plan.points = std::move(chosen);
  }
  if (args.has("--json"))
    print_document(nlohmann::json(planned.plan), true);
  else
    fputs(plan_table(planned).c_str(), stdout);
  if (size_t bad = planned.plan.unsatisfiable(); bad && args.has("--strict"))
    throw Error("--strict: " + std::to_string(bad) + " of " + std::to_string(planned.plan.points.size()) +
                    " matrix points are unsatisfiable (listed above)",
                ErrorKind::Unsatisfiable);
  return kExitOk;
}

int cmd_lock(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--strict", "--insecure-policy", "--check", "--update"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), kPlanOptions.begin(), kPlanOptions.end());
  options.insert(options.end(), {"--creds", "--ca-cert"});  // from: looking up a base image
  Args args(argv, flags, options, {"--set", "--only", "--insecure-registry"});
  if (maybe_help(args, kLockHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("lock wants one recipe file (see 'stackbuild lock --help')", ErrorKind::Usage);
  Planned planned = plan_recipe(load_recipe(args.positional()[0]), plan_options(args));
  const size_t n = planned.plan.points.size(), bad = planned.plan.unsatisfiable();
  const std::string counted = std::to_string(n) + (n == 1 ? " point, " : " points, ") + std::to_string(bad) +
                              " unsatisfiable";
  if (args.has("--check")) {  // offline: nothing is resolved against a repository, index or registry
    if (!args.all("--only").empty()) throw Error("--check reads the whole lockfile; drop --only", ErrorKind::Usage);
    auto problems = lock_problems(planned);
    const fs::path path = resolve::lock_path(planned.recipe.file);
    if (!problems.empty()) {
      std::string msg = path.string() + " is not current for " + planned.recipe.file.string() + " (" +
                        std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems") + "):";
      for (const auto& p : problems) msg += "\n  " + p;
      msg += "\n  review the recipe's change, then run 'stackbuild lock " + planned.recipe.file.string() + "'";
      throw Error(msg, ErrorKind::Input);
    }
    Context ctx = make_context(args);
    ctx.status->result("lock", path.string() + " is current (" + counted + ")");
    return kExitOk;
  }
  Context ctx = make_context(args);
  // A current lockfile stays as it is: its pins move only when asked to
  // (--update, or --only for some points), not because the archive or the
  // index moved since.
  if (!args.has("--update") && args.all("--only").empty()) {
    const fs::path path = resolve::lock_path(planned.recipe.file);
    if (fs::exists(path) && lock_problems(planned).empty()) {
      ctx.status->result("lock", path.string() + " is current (" + counted + "); nothing resolved again ('lock --update' "
                                 "resolves every point against today's repositories and index)");
      return kExitOk;
    }
  }
  if (bad && args.has("--strict")) throw Error(unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
  if (bad) ctx.status->message(Level::Warning, unsatisfiable_report(planned.plan));
  LockRequest request{args.all("--only"), registry_session_options(args)};
  LockOutcome done = lock_recipe(planned, ctx.store(), request, *ctx.status);
  ctx.status->result("lock", done.path.string() + " (" + counted + "; " + std::to_string(done.changes.size()) +
                                 (done.changes.size() == 1 ? " change)" : " changes)"));
  return kExitOk;
}

}  // namespace sb::cli

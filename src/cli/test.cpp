#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/image.hpp"
#include "image/layout.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/prefetch_order.hpp"
#include "pipeline/publish.hpp"
#include "registry/pull.hpp"
#include "registry/referrers.hpp"
#include "resolve/plan.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "verify/verify_image.hpp"

namespace sb::cli {

using json = nlohmann::json;

const char* const kTestHelp =
    "usage: stackbuild test RECIPE.yaml|LAYOUT[:TAG]|REGISTRY/REPO[:TAG] [options]\n"
    "\n"
    "Verifies images: unpacks each (cached in the store by manifest digest) and runs\n"
    "  - the static checks, which need no GPU: every ELF file's needed libraries resolve inside\n"
    "    the image (driver libraries excepted); every CUDA binary carries code (SASS, or PTX the\n"
    "    driver compiles) for each requested arch; the CUDA, cuDNN, NCCL and PyTorch versions in\n"
    "    the image match the resolved ones, read from a CUDA toolkit tree (version.json, the\n"
    "    headers) and from NVIDIA's wheels in site-/dist-packages (their headers and METADATA,\n"
    "    torch/version.py), each file that states one. GPU code is read from .nv_fatbin and\n"
    "    from the fat binaries a library embeds in its data (as cuFFT does). Files the recipe's\n"
    "    static_checks: {arch_ignore: [GLOB], libraries_ignore: [GLOB]} names (recorded in the\n"
    "    image) do not fail a check: their findings are listed and counted as ignored;\n"
    "  - when the host has a GPU, its driver against the image's dev.stackbuild.driver_min and\n"
    "    NVIDIA_REQUIRE_* (as the NVIDIA container toolkit checks them, with the CUDA version,\n"
    "    brand and arch the driver's libcuda and NVML report): below the floor, a driver branch\n"
    "    NVIDIA_REQUIRE_CUDA lists runs the GPU tests under CUDA compatibility, with a warning;\n"
    "    and every CUDA binary against each GPU's own arch where no requested arch covers it;\n"
    "  - the recipe's tests: and the built-in tests of its components (CUDA, cuBLAS, cuDNN, NCCL,\n"
    "    PyTorch, JAX, TensorFlow), each in the build sandbox on the image, GPU tests with the\n"
    "    host's driver injected (as 'stackbuild gpu' shows it).\n"
    "GPU tests are reported skipped, never passed, on a host without an NVIDIA GPU.\n"
    "\n"
    "What is tested:\n"
    "  RECIPE.yaml    the image of each matrix point in the layout the build wrote (-o, default\n"
    "                 out/<stack>), under the point's first tag, with the recipe's tests as they\n"
    "                 are now\n"
    "  LAYOUT[:TAG]   an image of an OCI layout, with the tests it recorded when it was built\n"
    "                 (its dev.stackbuild.tests label)\n"
    "  REGISTRY/REPO[:TAG|@DIGEST]  pulled into the store first, then as a layout\n"
    "Prints a summary table per image; exits 1 when a check or test failed.\n"
    "\n"
    "options:\n"
    "  --arch LIST            compute capabilities to check for (8.0,9.0); default: the image's\n"
    "                         dev.stackbuild.arch label\n"
    "  --expect NAME=VERSION  an expected component version, e.g. cuda=12.6.3 (repeatable);\n"
    "                         default: the image's dev.stackbuild.version.<name> labels\n"
    "  --gpus SEL             GPUs for GPU tests: all (default), none, indices or UUIDs\n"
    "  --compile-builtins     compile the built-in CUDA test programs even without a GPU (they\n"
    "                         always are with one), each reported as a test of its own\n"
    "  --nvcc PATH            the host nvcc for them when the image has none (default:\n"
    "                         $STACKBUILD_NVCC, nvcc on PATH, /usr/local/cuda/bin/nvcc)\n"
    "  --report FILE          also write the report as JSON (an array when several images)\n"
    "  --junit FILE           also write the report as JUnit XML, for CI (a testsuite per image)\n"
    "  --attach REGISTRY/REPO push each report there as an OCI artifact whose subject is the\n"
    "                         tested image (which must be in that repository); see "
    "docs/testing.md\n"
    "  --add-to-layout        add each report to the image's layout as such an artifact (one per\n"
    "                         image, replaced by the next), which push sends along and notes "
    "reads\n"
    "  --record-prefetch      record the image's files its tests open (fanotify: as root) and\n"
    "                         attach that order to the image in its layout; the next build of the\n"
    "                         point puts those files first in its eStargz layers, before the\n"
    "                         prefetch landmark, and carries the order on (docs/partial-pulls.md)\n"
    "  -o, --output DIR       with RECIPE: the layout the build wrote\n"
    "  --set, --catalog       with RECIPE: as for build\n"
    "  --only KEY=VALUE       with RECIPE: test only the images of those points, as build --only\n"
    "  --platform OS/ARCH     with LAYOUT:TAG naming an index over platforms: the image to test\n"
    "                         (default: this machine's; a RECIPE's points each take their own).\n"
    "                         An image of another platform runs its tests under QEMU user\n"
    "                         emulation (the machine's binfmt_misc entry, or qemu-user-static's\n"
    "                         interpreter registered in the sandbox's own), else skips them, and\n"
    "                         skips its GPU tests\n"
    "  --creds, --ca-cert, --insecure-registry  registry access, as for push\n"
    "  --insecure-policy    pull REF whatever policy.json says (as for pull)\n"
    "  --host-root DIR        look for the GPU driver and CDI specs under DIR, as 'stackbuild gpu\n"
    "                         --host-root' does (for tests; device nodes come from /dev unless\n"
    "                         a CDI spec gives a hostPath); binfmt_misc is looked for there too\n";

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

verify::VerifyOptions verify_options(const Args& args) {
  check_report_files(args);
  verify::VerifyOptions o;
  o.gpus = args.get("--gpus").value_or("all");
  verify::check_gpu_selection(o.gpus);
  if (auto a = args.get("--arch")) o.arch = split_commas(*a);
  for (const auto& e : args.all("--expect")) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--expect wants NAME=VERSION, not '" + e + "'", ErrorKind::Usage);
    o.expect[e.substr(0, eq)] = e.substr(eq + 1);
  }
  o.compile_builtins = args.has("--compile-builtins");
  if (auto n = args.get("--nvcc")) o.nvcc = *n;
  if (auto h = args.get("--host-root")) o.host_root = *h;
  return o;
}

// One image to test and what to call it.
struct Target {
  std::string name;
  LayoutImage image;
  std::optional<verify::RecordedTests> tests;
  std::optional<fs::path> layout;  // the OCI layout it is in (not for a registry's image)
};

// --report FILE and --junit FILE.
void write_reports(const std::vector<verify::VerifyReport>& reports, const Args& args) {
  std::optional<fs::path> report, junit;
  if (auto f = args.get("--report")) report = *f;
  if (auto f = args.get("--junit")) junit = *f;
  verify::write_report_files(reports, report, junit);
}

bool is_recipe_arg(const std::string& a) {
  return (a.ends_with(".yaml") || a.ends_with(".yml")) && fs::is_regular_file(a);
}

std::vector<Target> recipe_targets(const std::string& file, const Args& args, const Store& store) {
  Recipe recipe = load_recipe(file);
  std::vector<std::pair<Recipe, std::optional<resolve::ResolvedStack>>> points;
  const std::vector<std::string> only = args.all("--only");
  if (needs_plan(recipe) || args.has("--set") || args.has("--catalog") || !only.empty()) {
    Planned planned = plan_recipe(recipe, plan_options(args));
    std::vector<size_t> chosen;  // --only: those points; else all
    if (!only.empty())
      chosen = select_points(planned.recipe, planned.plan, only);
    else
      for (size_t i = 0; i < planned.plan.points.size(); ++i) chosen.push_back(i);
    for (size_t i : chosen)
      if (const auto& p = planned.plan.points[i]; p.stack) points.emplace_back(resolve::instantiate(planned.recipe, p), p.stack);
    if (points.empty()) throw Error(unsatisfiable_report(planned.plan), ErrorKind::Unsatisfiable);
  } else {
    points.emplace_back(recipe, std::nullopt);
  }
  auto out = args.get("-o") ? args.get("-o") : args.get("--output");
  std::vector<Target> targets;
  for (const auto& point : points) {
    const Recipe& r = point.first;  // not a structured binding: clang 14 cannot capture one
    const auto& stack = point.second;
    fs::path layout = out ? fs::path(*out) : fs::path("out") / r.stack;
    if (r.tags.empty()) throw Error(r.file.string() + ": the recipe has no tags, so its image has no name to find");
    std::string ref = layout_ref_name(r.tags.front());
    LayoutImage img = [&] {
      try {
        return open_layout_image(layout, ref, &store, "linux/" + r.architecture);  // its point's, from a per-tag index
      } catch (Error& e) {
        e.add_trace("looking for the image of " + r.tags.front() + " (build it first, or give -o the layout it went to)");
        throw;
      }
    }();
    std::vector<std::string> components;
    if (stack)
      for (const auto& [c, v] : stack->versions) components.push_back(c);
    targets.push_back(
        {layout.string() + ":" + ref, img, verify::parse_tests_label(verify::tests_label(r, components)), layout});
  }
  return targets;
}

Target registry_target(const std::string& arg, const Args& args, Context& ctx) {
  auto ref = registry::Reference::parse(arg);
  registry::PullOptions o;
  o.session = registry_session_options(args);
  auto pulled = registry::pull_image(ref, ctx.store(), o, *ctx.status);
  std::vector<Digest> layers;
  for (const auto& l : pulled.image.layers) layers.push_back(l.digest);
  return {ref.str(), verify::stored_image(ctx.store(), pulled.image.manifest_json, pulled.image.config_json,
                                          pulled.image.manifest.digest, layers),
          std::nullopt};
}

}  // namespace

void check_report_files(const Args& args) {
  for (const char* option : {"--report", "--junit"}) {
    auto f = args.get(option);
    if (!f) continue;
    fs::path dir = fs::path(*f).parent_path();
    std::error_code ec;
    if (!fs::is_directory(dir.empty() ? "." : dir, ec))
      throw Error(
          std::string(option) + " " + *f + ": the directory " + dir.string() + " does not exist",
          ErrorKind::Usage);
  }
}

// A report as its table for people, or in JSON mode as a "verify" event:
// there stdout holds JSON lines and nothing else.
void show_report(const verify::VerifyReport& report, Context& ctx) {
  if (ctx.json)
    ctx.status->event("verify", {{"report", report}});
  else
    fputs(verify::summary_table(report).c_str(), stdout);
}

int cmd_test(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(),
                 {"--arch", "--gpus", "--report", "--junit", "--nvcc", "--attach", "-o", "--output",
                  "--catalog", "--creds", "--ca-cert", "--host-root", "--platform"});
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--compile-builtins", "--insecure-policy", "--add-to-layout", "--record-prefetch"});
  Args args(argv, flags, options, {"--expect", "--set", "--only", "--insecure-registry"});
  if (maybe_help(args, kTestHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("test wants one RECIPE.yaml, LAYOUT[:TAG] or REGISTRY/REPO[:TAG]", ErrorKind::Usage);
  if (args.has("--only") && !is_recipe_arg(args.positional()[0]))
    throw Error("--only chooses points of a RECIPE.yaml; a LAYOUT:TAG or REGISTRY/REPO:TAG names one image already",
                ErrorKind::Usage);
  Context ctx = make_context(args);
  Store store = ctx.store();

  const std::string& what = args.positional()[0];
  std::vector<Target> targets;
  if (is_recipe_arg(what)) {
    targets = recipe_targets(what, args, store);
  } else if (is_registry_arg(what)) {
    targets.push_back(registry_target(what, args, ctx));
  } else if (fs::is_directory(split_layout_ref(what).first)) {
    auto [layout, ref] = split_layout_ref(what);
    targets.push_back({what, open_layout_image(layout, ref, &store, args.get("--platform").value_or("")), std::nullopt,
                       layout});
  } else {
    throw Error("test: '" + what + "' is neither a recipe file, an OCI layout nor a registry reference", ErrorKind::Usage);
  }

  for (const char* option : {"--add-to-layout", "--record-prefetch"})
    if (args.has(option))
      for (const auto& t : targets)
        if (!t.layout)
          throw Error(std::string(option) + " wants a LAYOUT or RECIPE, not a registry reference", ErrorKind::Usage);
  std::vector<verify::VerifyReport> reports;
  std::vector<AttachSubject> subjects;
  verify::VerifyOptions base = verify_options(args);
  base.record_opened = args.has("--record-prefetch");
  for (const auto& t : targets) {
    verify::VerifyOptions o = base;
    o.tests = t.tests;
    reports.push_back(verify::verify_image(store, t.image, t.name, o, *ctx.status));
    show_report(reports.back(), ctx);
    subjects.push_back({json::parse(t.image.manifest_json).value("mediaType", kMediaTypeManifest),
                        t.image.manifest_digest, t.image.manifest_json.size()});
  }
  write_reports(reports, args);
  if (args.has("--add-to-layout"))
    for (size_t i = 0; i < targets.size(); ++i)
      add_report_to_layout(*targets[i].layout, reports[i], subjects[i], *ctx.status);
  if (args.has("--record-prefetch"))
    for (size_t i = 0; i < targets.size(); ++i) {
      const auto& opened = reports[i].opened.value_or(std::vector<std::string>{});
      if (opened.empty()) {
        ctx.status->message(Level::Warning, targets[i].name + ": its tests opened none of its files; no order recorded");
        continue;
      }
      Digest d = add_prefetch_to_layout(*targets[i].layout, {subjects[i].media_type, subjects[i].digest, subjects[i].size, {}, {}},
                                        opened);
      ctx.status->result("prefetch order of " + targets[i].name + " (" + counted(opened.size(), "file", "files") + ")",
                         d.str());
    }
  if (auto a = args.get("--attach"))
    attach_reports(reports, subjects, *a, registry_session_options(args), store, *ctx.status);
  for (const auto& r : reports)
    if (!r.ok()) return kExitFailure;
  return kExitOk;
}

}  // namespace sb::cli

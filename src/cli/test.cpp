#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "verify/gpu.hpp"
#include "verify/static_checks.hpp"
#include "verify/unpacked.hpp"

namespace sb::cli {

using json = nlohmann::json;

const char* const kTestHelp =
    "usage: stackbuild test LAYOUT[:REF] [options]\n"
    "\n"
    "Verifies an image of an OCI layout: unpacks it (cached in the store by manifest digest)\n"
    "and runs the static checks, which need no GPU:\n"
    "  - every ELF file's needed libraries resolve inside the image (driver libraries excepted);\n"
    "  - every CUDA binary carries code (SASS, or PTX the driver compiles) for each requested arch;\n"
    "  - the CUDA, cuDNN and NCCL versions in the image match the expected ones.\n"
    "GPU tests are reported skipped, never passed, on a host without an NVIDIA GPU.\n"
    "Prints a summary table; exits 1 when a check failed.\n"
    "\n"
    "options:\n"
    "  --arch LIST            compute capabilities to check for (8.0,9.0); default: the image's\n"
    "                         dev.stackbuild.arch label\n"
    "  --expect NAME=VERSION  an expected component version, e.g. cuda=12.6.3 (repeatable);\n"
    "                         default: the image's dev.stackbuild.version.<name> labels\n"
    "  --gpus SEL             GPUs for GPU tests: all (default), none, indices or UUIDs\n"
    "  --report FILE          also write the report as JSON\n"
    "  --junit FILE           also write the report as JUnit XML, for CI\n";

static std::vector<std::string> split_commas(const std::string& s) {
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

int cmd_test(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--arch", "--gpus", "--report", "--junit"});
  Args args(argv, kCommonFlags, options, {"--expect"});
  if (maybe_help(args, kTestHelp)) return kExitOk;
  if (args.positional().size() != 1) throw Error("test wants one LAYOUT[:REF]", kExitUsage);
  Context ctx = make_context(args);
  Store store = ctx.store();

  auto [layout, ref] = split_layout_ref(args.positional()[0]);
  LayoutImage image = open_layout_image(layout, ref);
  json config = json::parse(image.config_json);
  json labels = config.value("config", json::object()).value("Labels", json::object());

  std::vector<std::string> arch = split_commas(args.get("--arch").value_or(labels.value("dev.stackbuild.arch", "")));
  std::map<std::string, std::string> expected;
  for (const auto& [k, v] : labels.items()) {
    const std::string prefix = "dev.stackbuild.version.";
    if (k.rfind(prefix, 0) == 0 && v.is_string()) expected[k.substr(prefix.size())] = v.get<std::string>();
  }
  for (const auto& e : args.all("--expect")) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--expect wants NAME=VERSION, not '" + e + "'", kExitUsage);
    expected[e.substr(0, eq)] = e.substr(eq + 1);
  }
  std::vector<std::string> ld_path;
  for (const auto& e : config.value("config", json::object()).value("Env", json::array()))
    if (e.is_string() && e.get<std::string>().rfind("LD_LIBRARY_PATH=", 0) == 0)
      ld_path = split_commas([](std::string s) {
        for (auto& c : s) c = c == ':' ? ',' : c;
        return s;
      }(e.get<std::string>().substr(16)));

  int task = ctx.status->task_begin("unpack " + image.manifest_digest.str(), 0);
  verify::ImageRoot root(verify::unpacked_root(store, image));
  ctx.status->task_end(task, root.root().string());

  verify::VerifyReport report;
  report.image = args.positional()[0];
  report.results.push_back(verify::check_libraries(root, ld_path));
  report.results.push_back(verify::check_cuda_arch(root, arch));
  report.results.push_back(verify::check_versions(root, expected));

  // GPU tests need an NVIDIA GPU; without one they are skipped, never passed.
  auto gpu = verify::load_cdi("/", args.get("--gpus").value_or("all"));
  if (!gpu) gpu = verify::discover_gpus("/", args.get("--gpus").value_or("all"));
  if (!gpu || !gpu->has_gpu())
    report.results.push_back({"gpu: driver and devices", "gpu", verify::Outcome::Skipped,
                              "no NVIDIA GPU on this host", {}, 0});
  else
    report.results.push_back({"gpu: driver and devices", "gpu", verify::Outcome::Passed,
                              "driver " + gpu->driver_version + ", " + std::to_string(gpu->gpus.size()) + " GPUs",
                              gpu->warnings, 0});

  if (auto f = args.get("--report")) write_file_atomic(*f, json(report).dump(2) + "\n");
  if (auto f = args.get("--junit")) write_file_atomic(*f, verify::junit_xml(report));
  fputs(verify::summary_table(report).c_str(), stdout);
  return report.ok() ? kExitOk : kExitFailure;
}

}  // namespace sb::cli

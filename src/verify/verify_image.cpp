#include "verify/verify_image.hpp"

#include "sandbox/emulation.hpp"

#include <chrono>
#include <map>
#include <optional>

#include "image/image.hpp"
#include "util/error.hpp"
#include "verify/builtin_tests.hpp"
#include "verify/driver_check.hpp"
#include "verify/opened_files.hpp"
#include "verify/run_in_image.hpp"
#include "verify/static_checks.hpp"
#include "verify/unpacked.hpp"

namespace sb::verify {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

LayoutImage stored_image(const Store& store, const std::string& manifest_json, const std::string& config_json,
                         const Digest& manifest_digest, const std::vector<Digest>& layers) {
  LayoutImage img{manifest_digest, "", manifest_json, config_json, {}};
  for (const auto& l : layers) img.layer_blobs.push_back(store.blob_path(l));
  return img;
}

VerifyReport verify_image(const Store& store, const LayoutImage& image, const std::string& name,
                          const VerifyOptions& o, Status& status) {
  ImageConfig config = read_image_config(image.config_json, "the config of " + name);
  auto label = [&](const std::string& k) {
    auto it = config.labels.find(k);
    return it != config.labels.end() ? it->second : std::string();
  };

  std::vector<std::string> arch = o.arch ? *o.arch : split(label("dev.stackbuild.arch"), ',');
  std::map<std::string, std::string> versions;
  const std::string prefix = "dev.stackbuild.version.";
  for (const auto& [k, v] : config.labels)
    if (k.rfind(prefix, 0) == 0) versions[k.substr(prefix.size())] = v;
  std::map<std::string, std::string> expected = versions;
  for (const auto& [k, v] : o.expect) expected[k] = v;

  TestEnvironment env;
  std::vector<std::string> ld_path;
  for (const std::string& s : config.env) {
    auto eq = s.find('=');
    if (eq == std::string::npos) continue;
    env.env[s.substr(0, eq)] = s.substr(eq + 1);
    if (s.substr(0, eq) == "LD_LIBRARY_PATH") ld_path = split(s.substr(eq + 1), ':');
  }
  if (!env.env.count("PATH")) env.env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env.cwd = config.working_dir.empty() ? "/" : config.working_dir;
  env.host_root = o.host_root;

  int task = status.task_begin("unpack " + image.manifest_digest.str(), 0);
  UnpackedRoot unpacked = unpacked_root(store, image);  // held: not evicted while the tests run
  ImageRoot root(unpacked.path);
  status.task_end(task, root.root().string());

  // The tests the image carries (or those given), with its static_checks exemptions.
  RecordedTests recorded = o.tests ? *o.tests : parse_tests_label(label(kTestsLabel));

  VerifyReport report;
  report.image = name;
  report.results.push_back(check_libraries(root, ld_path, recorded.libraries_ignore));
  // The image's GPU code, read once for the requested archs and the GPU's.
  std::optional<CudaBinaries> cuda;
  double cuda_seconds = 0;
  auto binaries = [&]() -> const CudaBinaries& {
    if (!cuda) {
      auto start = std::chrono::steady_clock::now();
      cuda = cuda_binaries(root);
      cuda_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return *cuda;
  };
  report.results.push_back(arch.empty() ? check_cuda_arch(CudaBinaries{}, arch)
                                        : check_cuda_arch(binaries(), arch, recorded.arch_ignore));
  report.results.back().seconds += cuda_seconds;
  report.results.push_back(check_versions(root, expected));

  // An image of another platform: its tests run under QEMU user emulation
  // where this machine has it registered, else are skipped; its GPU tests
  // need a machine of its platform.
  const std::string image_arch = config.architecture.empty() ? sandbox::host_architecture() : config.architecture;
  const sandbox::Emulation emulation = sandbox::emulation_for(image_arch, o.host_root);
  if (!emulation.native) {
    if (emulation.available) {
      env.emulated = "qemu-" + sandbox::machine_of(image_arch);
      env.architecture = image_arch;
      status.message(Level::Info, name + ": a linux/" + image_arch + " image on this linux/" +
                                      sandbox::host_architecture() + " machine: its tests run emulated (" +
                                      env.emulated + "), its GPU tests are skipped");
    } else {
      env.cannot_run = sandbox::emulation_missing(emulation, image_arch);
    }
  }

  // The GPU: a CDI spec, else discovery; its driver against the image's need.
  std::optional<GpuInjection> gpu;
  if (o.gpus != "none" && emulation.native) {
    gpu = load_cdi(o.host_root, o.gpus);
    if (!gpu) {
      auto caps = env.env.find("NVIDIA_DRIVER_CAPABILITIES");
      gpu = discover_gpus(o.host_root, o.gpus, caps == env.env.end() ? "" : caps->second);
    }
  }
  if (!gpu || !gpu->has_gpu()) {
    gpu.reset();
    if (!emulation.native)
      env.no_gpu_reason = "a linux/" + image_arch + " image on this linux/" + sandbox::host_architecture() +
                          " machine: its GPU tests run on a machine of its platform";
    report.results.push_back({"gpu: driver and devices", "gpu", Outcome::Skipped,
                              o.gpus == "none" ? "--gpus none" : !emulation.native ? env.no_gpu_reason : "no NVIDIA GPU on this host",
                              {}, 0});
  } else {
    ImageDriverNeeds needs = driver_needs(config.labels, env.env, compat_driver_version(root));
    try {
      DriverVerdict verdict = check_driver(*gpu, needs);
      std::map<std::string, int> models;
      for (const auto& g : gpu->gpus) ++models[g.model.empty() ? "NVIDIA GPU" : g.model];
      for (const auto& [m, n] : models)
        report.gpus += (report.gpus.empty() ? "" : ", ") + std::to_string(n) + "x " + m;
      report.gpus += ", driver " + gpu->driver_version;
      std::vector<std::string> warnings = gpu->warnings;
      warnings.insert(warnings.end(), verdict.warnings.begin(), verdict.warnings.end());
      for (auto& w : driver_library_gaps(root, *gpu, o.host_root, ld_path))
        warnings.push_back(std::move(w));
      report.results.push_back(
          {"gpu: driver and devices", "gpu", Outcome::Passed, verdict.detail, warnings, 0});
    } catch (const Error& e) {
      report.results.push_back({"gpu: driver and devices", "gpu", Outcome::Failed, e.what(), gpu->warnings, 0});
      env.no_gpu_reason = "the image cannot run on this host's driver";
      gpu.reset();
    }
  }
  if (gpu) {
    env.gpu = &*gpu;
    // Code for each GPU's arch (from NVML) that no requested arch covers already.
    std::map<std::string, std::string> archs;  // "9.0" -> "GPU 0, 1"
    for (const auto& g : gpu->gpus)
      if (!g.arch.empty())
        archs[g.arch] += (archs[g.arch].empty() ? "GPU " : ", ") + std::to_string(g.index);
    for (const auto& [a, which] : archs) {
      bool requested = false;
      for (const auto& r : arch) {
        try {
          requested = requested || sm_number(r.substr(0, r.find('+'))) == sm_number(a);
        } catch (const Error&) {  // not MAJOR.MINOR: the static check says so
        }
      }
      if (requested) continue;
      TestResult r = check_gpu_code(binaries(), a, which, recorded.arch_ignore);
      if (r.outcome != Outcome::Skipped) report.results.push_back(std::move(r));
    }
  }

  // The recipe's tests, then the built-in ones.
  std::vector<ImageTest> tests;
  for (const auto& t : recorded.tests) tests.push_back(from_spec(t));
  sandbox::LinuxSandbox linux_sandbox;
  sandbox::Sandbox& sb = o.sandbox ? *o.sandbox : linux_sandbox;
  if (!tests.empty() || !recorded.builtin.empty())
    if (std::string w = full_copy_warning(sb, root); !w.empty()) status.message(Level::Warning, w);
  if (!recorded.builtin.empty()) {
    BuiltinOptions bo;
    bo.versions = expected;
    bo.arch = arch;
    bo.ld_library_path = ld_path;
    bo.compile = (o.compile_builtins || env.gpu) && env.cannot_run.empty();
    bo.architecture = env.architecture;  // another platform's image: its nvcc runs emulated
    bo.cache_dir = store.private_dir("builtin-tests");
    bo.host_nvcc = o.nvcc;
    bo.sandbox = &sb;
    std::vector<CompiledProgram> compiled;
    int t = bo.compile ? status.task_begin("compile built-in tests", 0) : -1;
    auto builtins = builtin_tests(root, recorded.builtin, bo, compiled);
    if (t >= 0) status.task_end(t, std::to_string(compiled.size()) + " programs");
    for (const auto& c : compiled) {
      TestResult r{"builtin: compile " + c.component, "builtin", Outcome::Passed, "", {}, 0};
      if (!c.error.empty()) {
        r.outcome = Outcome::Failed;
        r.message = c.error.substr(0, c.error.find('\n'));
        if (c.error.find('\n') != std::string::npos) r.details = split(c.error.substr(c.error.find('\n') + 1), '\n');
      } else {
        r.message = c.compiler + "; needs " + c.cudart + ", the image's " + c.cudart_in_image;
      }
      report.results.push_back(std::move(r));
    }
    tests.insert(tests.end(), builtins.begin(), builtins.end());
  }
  // --record-prefetch: the files the tests open, in order, for eStargz layers.
  std::optional<OpenedFiles> opened;
  if (o.record_opened) {
    if (std::string w = full_copy_warning(sb, root); !w.empty())
      status.message(Level::Warning, "the tests run in a copy of the image, so the files they open cannot be recorded");
    opened.emplace(root.root());
  }
  for (auto& r : run_tests(sb, root, tests, env)) report.results.push_back(std::move(r));
  if (opened) {
    report.opened = opened->finish();
    if (opened->lost_events())
      status.message(Level::Warning, "the kernel dropped some open events: the recorded files may lack some");
  }
  return report;
}

GateDecision gate(const std::vector<VerifyReport>& reports, bool no_verify) {
  GateDecision d;
  for (const auto& rep : reports)
    for (const auto& r : rep.results)
      if (r.outcome == Outcome::Failed)
        d.message += "  " + rep.image + ": " + r.name + (r.message.empty() ? "" : ": " + r.message) + "\n";
  if (d.message.empty()) return d;
  if (no_verify) {
    d.message = "--no-verify: pushing although these failed:\n" + d.message;
    return d;
  }
  d.push = false;
  d.message = "not pushing: verification failed (see the report; --no-verify pushes anyway):\n" + d.message;
  return d;
}

}  // namespace sb::verify

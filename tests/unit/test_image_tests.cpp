// Image tests: the recipe's `tests:` and `builtin_tests:` keys, what the image
// records of them, how a run is judged, GPU tests skipped without a GPU, the
// build's gate, the labels, and the referrers documents.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "image/image.hpp"
#include "pipeline/labels.hpp"
#include "recipe/recipe.hpp"
#include "registry/referrers.hpp"
#include "util/process.hpp"
#include "verify/builtin_tests.hpp"
#include "verify/image_tests.hpp"
#include "verify/run_in_image.hpp"
#include "verify/verify_image.hpp"

using namespace sb;
using namespace sb::verify;

namespace {

const std::string kCopy = "stack: t\nlayers:\n  - {name: a, copy: [{src: f, dst: /f}]}\n";

Recipe load(const fs::path& dir, const std::string& yaml) {
  test::write(dir / "f", "x");
  test::write(dir / "r.yaml", yaml);
  return load_recipe(dir / "r.yaml");
}

std::optional<InputError> error_of(const fs::path& dir, const std::string& yaml) {
  try {
    load(dir, yaml);
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

// A recipe error expected at line:column with a message containing `message`.
struct ErrorCase {
  std::string yaml;
  int line, column;
  const char* message;
};

void check_errors(const fs::path& dir, const std::vector<ErrorCase>& cases) {
  for (const auto& c : cases) {
    auto e = error_of(dir, c.yaml);
    REQUIRE(e);
    INFO(e->render());
    CHECK(e->location().line == c.line);
    CHECK(e->location().column == c.column);
    CHECK_THAT(e->message(), Catch::Contains(c.message));
  }
}

// Records what it was asked to run; answers with a set status and output.
class FakeSandbox : public sandbox::Sandbox {
 public:
  std::vector<sandbox::SandboxSpec> runs;
  std::map<std::string, std::pair<int, std::string>> answers;  // the command's last word -> status, output
  std::function<void(const sandbox::SandboxSpec&)> during;  // looks at a run's layers while it runs
  std::string overlay_refused;  // overlay_unavailable_in's answer, for every directory
  std::string overlay_unavailable_in(const fs::path&) const override { return overlay_refused; }
  sandbox::SandboxResult run(const sandbox::SandboxSpec& spec, const sandbox::OutputFn& out) override {
    runs.push_back(spec);
    if (during) during(spec);
    auto it = answers.find(spec.argv.back());
    if (it == answers.end()) return {0, false};
    out(it->second.second);
    if (it->second.first < 0) return {137, true};
    return {it->second.first, false};
  }
};

}  // namespace

TEST_CASE("recipe tests: exit and timeout - builtin_tests switches", "[verify][tests][recipe]") {
  TempDir tmp;
  Recipe r = load(tmp.path(), kCopy +
                                  "tests:\n"
                                  "  - {name: ok, run: \"true\"}\n"
                                  "  - {name: fails, run: \"exit 3\", exit: 3, timeout: 2m, expect: done, gpu: true}\n"
                                  "builtin_tests: {cudnn: false, pytorch: true}\n");
  REQUIRE(r.tests.size() == 2);
  CHECK(r.tests[0].exit == 0);
  CHECK(r.tests[0].timeout == 0);
  CHECK(r.tests[1].exit == 3);
  CHECK(r.tests[1].timeout == 120);
  CHECK(r.tests[1].gpu);
  CHECK(r.builtin_tests.on("cuda"));
  CHECK_FALSE(r.builtin_tests.on("cudnn"));
  CHECK(r.builtin_tests.on("pytorch"));

  Recipe off = load(tmp.path(), kCopy + "builtin_tests: false\n");
  CHECK_FALSE(off.builtin_tests.on("cuda"));

  const std::vector<ErrorCase> cases = {
      {kCopy + "tests:\n  - {name: a, run: x, exit: 300}\n", 5, 29, "exit status from 0 to 255, not 300"},
      {kCopy + "tests:\n  - {name: a, run: x, exit: one}\n", 5, 29, "'exit'"},
      {kCopy + "tests:\n  - {name: a, run: x, timeout: -5}\n", 5, 32, "positive duration"},
      {kCopy + "tests:\n  - {name: a, run: x, timout: 5}\n", 5, 23, "did you mean 'timeout'"},
      {kCopy + "builtin_tests: {cudaa: false}\n", 4, 17, "no built-in test for 'cudaa'"},
      {kCopy + "builtin_tests: {cuda: maybe}\n", 4, 23, "builtin_tests.cuda"},
      {kCopy + "builtin_tests: [cuda]\n", 4, 16, "'builtin_tests'"},
  };
  check_errors(tmp.path(), cases);
}

TEST_CASE("the tests label: recipe tests and the built-in ones of resolved components", "[verify][tests]") {
  TempDir tmp;
  Recipe r = load(tmp.path(), kCopy +
                                  "tests:\n  - {name: v, run: \"echo 12.6\", expect: \"12.6\", exit: 1, timeout: 30, gpu: true}\n"
                                  "builtin_tests: {cudnn: false}\n");
  std::string label = tests_label(r, {"cuda", "cudnn", "nccl", "python"});
  RecordedTests t = parse_tests_label(label);
  REQUIRE(t.tests.size() == 1);
  CHECK(t.tests[0].name == "v");
  CHECK(t.tests[0].run.value == "echo 12.6");
  CHECK(t.tests[0].expect.value == "12.6");
  CHECK(t.tests[0].exit == 1);
  CHECK(t.tests[0].timeout == 30);
  CHECK(t.tests[0].gpu);
  CHECK(t.builtin == std::vector<std::string>{"cuda", "nccl"});  // cudnn off, python has none

  Recipe none = load(tmp.path(), kCopy + "builtin_tests: false\n");
  CHECK(tests_label(none, {"cuda"}).empty());
  CHECK(parse_tests_label("").empty());
  CHECK_THROWS_WITH(parse_tests_label("{\"tests\": [{\"run\": 1}]}"), Catch::Contains("dev.stackbuild.tests is malformed"));
}

TEST_CASE("static_checks: ignore globs are parsed - merged under extends - recorded in the label", "[verify][tests][recipe]") {
  TempDir tmp;
  Recipe r = load(tmp.path(), kCopy +
                                  "static_checks:\n"
                                  "  arch_ignore: [\"/usr/local/lib/python3.*/dist-packages/nvidia/cufft/lib/libcufftw.so.*\"]\n"
                                  "  libraries_ignore: [\"**/libcufile_rdma.so.*\", /opt/x/bin/tool]\n");
  CHECK(r.static_checks.arch_ignore ==
        std::vector<std::string>{"/usr/local/lib/python3.*/dist-packages/nvidia/cufft/lib/libcufftw.so.*"});
  CHECK(r.static_checks.libraries_ignore == std::vector<std::string>{"**/libcufile_rdma.so.*", "/opt/x/bin/tool"});
  fs::copy_file(r.file, tmp.path() / "parent.yaml");  // for the extends: cases below

  // Recorded in the image without any test, and read back by `stackbuild test LAYOUT`.
  std::string label = tests_label(r, {});
  REQUIRE_FALSE(label.empty());
  RecordedTests t = parse_tests_label(label);
  CHECK(t.tests.empty());
  CHECK(t.arch_ignore == r.static_checks.arch_ignore);
  CHECK(t.libraries_ignore == r.static_checks.libraries_ignore);
  CHECK_FALSE(t.empty());
  // Without the key the label is as it was.
  CHECK(tests_label(load(tmp.path(), kCopy + "tests:\n  - {name: a, run: \"true\"}\n"), {}) ==
        R"({"builtin":[],"tests":[{"name":"a","run":"true"}]})");
  CHECK_THROWS_WITH(parse_tests_label(R"({"static_checks": {"arch_ignore": ["/a/[b"]}})"),
                    Catch::Contains("malformed") && Catch::Contains("unclosed '['"));
  CHECK_THROWS_WITH(parse_tests_label(R"({"static_checks": {"arch_ignor": []}})"),
                    Catch::Contains("unknown static_checks key 'arch_ignor'"));
  CHECK_THROWS_WITH(parse_tests_label(R"({"static_checks": {"arch_ignore": [1]}})"), Catch::Contains("malformed"));

  // extends: a child's list replaces its parent's, key by key; `[]` clears one.
  test::write(tmp.path() / "child.yaml", "extends: parent.yaml\nstatic_checks:\n  arch_ignore: [/opt/a.so]\n");
  Recipe child = load_recipe(tmp.path() / "child.yaml");
  CHECK(child.static_checks.arch_ignore == std::vector<std::string>{"/opt/a.so"});
  CHECK(child.static_checks.libraries_ignore == r.static_checks.libraries_ignore);
  test::write(tmp.path() / "child2.yaml", "extends: parent.yaml\nstatic_checks: {libraries_ignore: []}\n");
  Recipe child2 = load_recipe(tmp.path() / "child2.yaml");
  CHECK(child2.static_checks.arch_ignore == r.static_checks.arch_ignore);
  CHECK(child2.static_checks.libraries_ignore.empty());
  test::write(tmp.path() / "child3.yaml", "extends: parent.yaml\nstack: other\n");
  CHECK(load_recipe(tmp.path() / "child3.yaml").static_checks.arch_ignore == r.static_checks.arch_ignore);

  const std::vector<ErrorCase> cases = {
      {kCopy + "static_checks:\n  arch_ignore: [\"/usr/lib/[abc\"]\n", 5, 17, "unclosed '['"},
      {kCopy + "static_checks:\n  arch_ignore: [\"/usr/lib/**.so\"]\n", 5, 17, "'**' that is not a whole path component"},
      {kCopy + "static_checks:\n  arch_ignore: [libcufftw.so.11]\n", 5, 17, "a relative path"},
      {kCopy + "static_checks:\n  arch_ignore: \"/usr/lib/x.so\"\n", 5, 16, "'static_checks.arch_ignore' (a list of globs"},
      {kCopy + "static_checks:\n  arch_ignore: [{path: /x}]\n", 5, 17, "a glob of static_checks.arch_ignore"},
      {kCopy + "static_checks:\n  arch_ingore: [/x]\n", 5, 3, "did you mean 'arch_ignore'"},
      {kCopy + "static_checks: [/x]\n", 4, 16, "'static_checks' (a map"},
  };
  check_errors(tmp.path(), cases);
}

TEST_CASE("a test run is judged by exit status - output - timeout", "[verify][tests]") {
  ImageTest t;
  t.name = "recipe: x";
  t.kind = "recipe";
  CHECK(judge(t, {0, false}, "", 1).outcome == Outcome::Passed);
  auto bad = judge(t, {2, false}, "line1\nboom\n", 1);
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(bad.message == "exited with status 2, expected 0");
  CHECK(bad.details == std::vector<std::string>{"line1", "boom"});
  t.exit = 2;
  CHECK(judge(t, {2, false}, "", 1).outcome == Outcome::Passed);
  CHECK(judge(t, {0, false}, "", 1).outcome == Outcome::Failed);
  t.exit = 0;
  t.expect = "cuda 12.6";
  CHECK(judge(t, {0, false}, "found cuda 12.6\n", 1).outcome == Outcome::Passed);
  CHECK(judge(t, {0, false}, "found cuda 12.4\n", 1).message == "its output does not contain 'cuda 12.6'");
  t.timeout = 5;
  CHECK(judge(t, {137, true}, "", 5).message == "ran past its timeout of 5s and was killed");
}

TEST_CASE("run_tests: GPU tests are skipped without a GPU and get the driver with one", "[verify][tests][gpu]") {
  TempDir tmp;
  fs::create_directories(tmp.path() / "root/bin");
  ImageRoot root(tmp.path() / "root");
  TestSpec a, g;
  a.name = "cpu";
  a.run.value = "echo hi";
  a.timeout = 7;
  g.name = "gpu";
  g.run.value = "nvidia-smi";
  g.gpu = true;
  std::vector<ImageTest> tests{from_spec(a), from_spec(g)};
  ImageTest broken = from_spec(a);
  broken.name = "recipe: broken";
  broken.unavailable = "the test program did not compile: x";
  tests.push_back(broken);

  FakeSandbox sb;
  sb.answers["nvidia-smi"] = {0, "GPU 0: H200\n"};
  TestEnvironment env;
  env.env = {{"PATH", "/bin"}};
  auto r = run_tests(sb, root, tests, env);
  REQUIRE(r.size() == 3);
  CHECK(r[0].outcome == Outcome::Passed);
  CHECK(r[1].outcome == Outcome::Skipped);
  CHECK(r[1].message == "no NVIDIA GPU on this host");
  CHECK(r[2].outcome == Outcome::Failed);
  REQUIRE(sb.runs.size() == 1);  // the skipped and the broken one never ran
  CHECK(sb.runs[0].argv == std::vector<std::string>{"/bin/sh", "-c", "echo hi"});
  CHECK(sb.runs[0].timeout_seconds == 7);
  CHECK(sb.runs[0].env.at("PATH") == "/bin");

  GpuInjection gpu;
  gpu.gpus.push_back({0, 0, "GPU-a", "H200", ""});
  gpu.device_nodes = {"/dev/nvidiactl", "/dev/nvidia0"};
  gpu.mounts.push_back({"usr/lib/libcuda.so.550.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.1"});
  env.gpu = &gpu;
  sb.runs.clear();
  r = run_tests(sb, root, {from_spec(g)}, env);
  REQUIRE(r.size() == 1);
  CHECK(r[0].outcome == Outcome::Passed);
  // The image has no ldconfig: the host's, where it is static (Debian's is),
  // told every folder of the injected libraries; then the test.
  REQUIRE(sb.runs.size() == (fs::exists("/sbin/ldconfig") ? 2 : 1));
  if (sb.runs.size() == 2) {
    CHECK(sb.runs[0].argv ==
          std::vector<std::string>{"/.stackbuild-ldconfig", "/usr/lib/x86_64-linux-gnu"});
    REQUIRE(sb.runs[0].mounts.size() == 2);
    CHECK(sb.runs[0].mounts[1].target == "/.stackbuild-ldconfig");
  }
  const auto& test = sb.runs.back();
  CHECK(test.timeout_seconds == kDefaultTestTimeout);
  CHECK(std::count(test.devices.begin(), test.devices.end(), "nvidia0") == 1);
  REQUIRE(test.mounts.size() == 1);
  CHECK(test.mounts[0].target == "/usr/lib/x86_64-linux-gnu/libcuda.so.550.1");
}

TEST_CASE("the gate blocks a push when a test failed unless --no-verify", "[verify][gate]") {
  VerifyReport ok{"app:1", {{"recipe: a", "recipe", Outcome::Passed, "", {}, 0},
                            {"builtin: cuda", "builtin", Outcome::Skipped, "no NVIDIA GPU on this host", {}, 0}}};
  VerifyReport bad{"app:2", {{"recipe: b", "recipe", Outcome::Failed, "exited with status 1, expected 0", {}, 0}}};
  auto d = gate({ok}, false);
  CHECK(d.push);
  CHECK(d.message.empty());
  d = gate({ok, bad}, false);
  CHECK_FALSE(d.push);
  CHECK_THAT(d.message, Catch::Contains("not pushing"));
  CHECK_THAT(d.message, Catch::Contains("app:2: recipe: b: exited with status 1, expected 0"));
  CHECK_THAT(d.message, !Catch::Contains("app:1"));
  d = gate({ok, bad}, true);
  CHECK(d.push);
  CHECK_THAT(d.message, Catch::Contains("--no-verify"));
}

TEST_CASE("labels: arch - versions - driver_min - tests - and they win over the recipe's", "[pipeline][labels]") {
  TempDir tmp;
  Recipe r = load(tmp.path(), kCopy + "tests:\n  - {name: a, run: \"true\"}\n");
  resolve::ResolvedStack s;
  s.versions = {{"cuda", "12.6.3"}, {"cudnn", "9.5.1.17"}, {"python", "3.12.7"}};
  s.arch = {"8.0", "9.0"};
  s.driver_min = "560.28.03";
  auto l = stack_labels(r, &s);
  CHECK(l.at("dev.stackbuild.arch") == "8.0,9.0");
  CHECK(l.at("dev.stackbuild.version.cuda") == "12.6.3");
  CHECK(l.at("dev.stackbuild.version.python") == "3.12.7");
  CHECK(l.at("dev.stackbuild.driver_min") == "560.28.03");
  RecordedTests t = parse_tests_label(l.at(kTestsLabel));
  CHECK(t.tests.size() == 1);
  CHECK(t.builtin == std::vector<std::string>{"cuda", "cudnn"});

  CHECK(stack_labels(Recipe{}, nullptr).empty());  // no tests, no stack: no labels, digests unchanged

  std::map<std::string, std::string> labels{{"dev.stackbuild.arch", "7.5"}, {"team", "ml"}};
  auto w = merge_labels(labels, l);
  CHECK(labels.at("dev.stackbuild.arch") == "8.0,9.0");
  CHECK(labels.at("team") == "ml");
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Catch::Contains("the recipe's '7.5' is replaced by the resolved '8.0,9.0'"));
}

TEST_CASE("referrers: the artifact manifest and the referrers tag index", "[registry][referrers]") {
  using namespace sb::registry;
  std::string report = "{\"summary\": {}}";
  BlobRef file{Digest::of_bytes(report), report.size(), kTestReportType, {}, report};
  Subject subject{"application/vnd.oci.image.manifest.v1+json", Digest::of_bytes("m"), 1};
  std::string m = artifact_manifest(kTestReportType, file, subject, {{"org.opencontainers.image.title", "r"}});
  auto j = nlohmann::json::parse(m);
  CHECK(j["artifactType"] == kTestReportType);
  CHECK(j["subject"]["digest"] == subject.digest.str());
  CHECK(j["config"]["mediaType"] == "application/vnd.oci.empty.v1+json");
  CHECK(j["config"]["digest"] == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  CHECK(j["layers"][0]["digest"] == file.digest.str());
  CHECK(referrers_tag(subject.digest) == "sha256-" + subject.digest.hex());

  auto idx = nlohmann::json::parse(add_referrer("", m));
  CHECK(idx["mediaType"] == "application/vnd.oci.image.index.v1+json");
  REQUIRE(idx["manifests"].size() == 1);
  CHECK(idx["manifests"][0]["digest"] == Digest::of_bytes(m).str());
  CHECK(idx["manifests"][0]["artifactType"] == kTestReportType);
  CHECK(idx["manifests"][0]["size"] == m.size());
  std::string m2 = artifact_manifest(kTestReportType, file, subject, {});
  auto idx2 = nlohmann::json::parse(add_referrer(add_referrer(idx.dump(), m2), m));  // the same one again: kept once
  CHECK(idx2["manifests"].size() == 2);
}

TEST_CASE("built-in programs: embedded - and an image without CUDA headers says so", "[verify][builtin]") {
  const auto& src = builtin_program_sources();
  for (const char* f : {"device_query.cu", "gemm.cu", "conv.cu", "allreduce.cu", "common.h"})
    CHECK(src.count(f) == 1);
  CHECK_THAT(src.at("device_query.cu"), Catch::Contains("cudaGetDeviceCount"));

  TempDir tmp;
  fs::create_directories(tmp.path() / "root/usr/lib");
  ImageRoot root(tmp.path() / "root");
  BuiltinOptions o;
  o.cache_dir = tmp.path() / "cache";
  auto c = compile_builtin(root, "cuda", o);
  CHECK(c.binary.empty());
  CHECK_THAT(c.error, Catch::Contains("the image has no cuda_runtime.h"));
  test::write(tmp.path() / "root/usr/local/cuda/include/cuda_runtime.h", "");
  c = compile_builtin(root, "cublas", o);
  CHECK_THAT(c.error, Catch::Contains("the image has no cublas_v2.h"));
  c = compile_builtin(root, "cuda", o);
  CHECK_THAT(c.error, Catch::Contains("the image has no libcudart.so*"));

  // Without compiling (no GPU), the tests exist and are GPU tests; python ones carry the versions.
  std::vector<CompiledProgram> compiled;
  o.versions = {{"cuda", "12.6.3"}, {"cudnn", "9.5.1"}};
  auto tests = builtin_tests(root, {"cuda", "pytorch", "python"}, o, compiled);
  REQUIRE(tests.size() == 3);
  CHECK(compiled.empty());
  CHECK(tests[0].name == "builtin: cuda");
  CHECK(tests[0].gpu);
  // The framework: its import part first, which needs no GPU, then the GPU part.
  CHECK(tests[1].name == "builtin: pytorch import");
  CHECK_FALSE(tests[1].gpu);
  CHECK(tests[1].env.at("SB_PART") == "import");
  CHECK(tests[2].name == "builtin: pytorch");
  CHECK(tests[2].gpu);
  CHECK(tests[2].env.count("SB_PART") == 0);
  for (const auto* t : {&tests[1], &tests[2]}) {
    CHECK(t->argv[0] == "python3");
    CHECK(t->env.at("SB_EXPECT_CUDA") == "12.6.3");
    CHECK(t->env.at("SB_EXPECT_CUDNN") == "9.5.1");
  }
}

TEST_CASE("the PyTorch test reports versions and compares them to the resolved ones", "[verify][builtin]") {
  // A stand-in torch module: no GPU, CUDA 12.4, cuDNN 9.1.0.
  TempDir tmp;
  test::write(tmp.path() / "torch/__init__.py",
              "__version__ = '2.5.1'\n"
              "class version:\n    cuda = '12.4'\n"
              "class backends:\n"
              "    class cudnn:\n        @staticmethod\n        def version(): return 90100\n"
              "    class cuda:\n        class matmul:\n            allow_tf32 = True\n"
              "class cuda:\n    @staticmethod\n    def is_available(): return False\n"
              "    @staticmethod\n    def device_count(): return 0\n"
              "    class nccl:\n        @staticmethod\n        def version(): return (2, 21, 5)\n");
  std::vector<CompiledProgram> compiled;
  BuiltinOptions o;
  auto run = [&](const std::string& cuda, size_t part = 1) {
    o.versions = {{"cuda", cuda}, {"cudnn", "9.1.0.70"}};
    auto t = builtin_tests(ImageRoot(tmp.path()), {"pytorch"}, o, compiled).at(part);
    ProcessSpec p;
    p.argv = t.argv;
    p.env = current_environment();
    p.env["PYTHONPATH"] = tmp.path().string();
    for (const auto& [k, v] : t.env) p.env[k] = v;
    p.capture_stdout = p.merge_stderr = true;
    auto r = run_process(p);
    INFO(r.output);
    return std::make_pair(r.exit_status, nlohmann::json::parse(r.output));
  };
  auto [status, j] = run("12.4.1");
  CHECK(status == 1);  // no GPU: never passed
  CHECK(j["ok"] == false);
  CHECK(j["cuda"] == "12.4");
  CHECK(j["cudnn"] == "9.1.0");
  CHECK_FALSE(j.contains("errors"));
  std::tie(status, j) = run("12.6");
  REQUIRE(j.contains("errors"));
  CHECK(j["errors"][0] == "cuda 12.4, the image was resolved with 12.6");
  // The import part passes without a GPU when the versions agree, and names NCCL's.
  std::tie(status, j) = run("12.4.1", 0);
  CHECK(status == 0);
  CHECK(j["ok"] == true);
  CHECK(j["nccl"] == "2.21.5");
  CHECK_FALSE(j.contains("gpus"));
  std::tie(status, j) = run("12.6", 0);
  CHECK(status == 1);
  CHECK(j["errors"][0] == "cuda 12.4, the image was resolved with 12.6");
}

TEST_CASE("image config: read as a runtime reads it, a field of the wrong type refused by name",
          "[verify]") {
  ImageConfig c = read_image_config(
      R"({"architecture":"arm64","os":"linux","variant":"v8","config":{"Env":["PATH=/bin","A=b=c"],"Cmd":null,)"
      R"("Entrypoint":["/bin/sh","-c"],"WorkingDir":"/w","User":"1000","Labels":{"k":"v"},"ExposedPorts":{"80/tcp":{}}},)"
      R"("rootfs":{"type":"layers","diff_ids":[]}})",
      "the config of x");
  CHECK(c.architecture == "arm64");
  CHECK(c.variant == "v8");
  CHECK(c.env == std::vector<std::string>{"PATH=/bin", "A=b=c"});
  CHECK(c.cmd.empty());
  CHECK(c.entrypoint == std::vector<std::string>{"/bin/sh", "-c"});
  CHECK(c.working_dir == "/w");
  CHECK(c.user == "1000");
  CHECK(c.labels == std::map<std::string, std::string>{{"k", "v"}});
  CHECK(c.exposed_ports == std::vector<std::string>{"80/tcp"});
  ImageConfig bare = read_image_config(R"({"config":null})", "w");
  CHECK(bare.os == "linux");
  CHECK(bare.architecture.empty());
  CHECK(bare.env.empty());

  auto refused = [](const std::string& doc) {
    try {
      read_image_config(doc, "the config of app:1");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(refused("nope").rfind("the config of app:1 is not JSON: ", 0) == 0);
  CHECK(refused("[]") == "the config of app:1 is not a JSON object");
  CHECK(refused(R"({"architecture":5})") ==
        "the config of app:1: architecture is a number, not a string");
  CHECK(refused(R"({"config":[]})") == "the config of app:1: config is an array, not an object");
  CHECK(refused(R"({"config":{"Env":"PATH=/bin"}})") ==
        "the config of app:1: config.Env is a string, not a list of strings");
  CHECK(refused(R"({"config":{"Env":["A=1",null]}})") ==
        "the config of app:1: config.Env[1] is null, not a string");
  CHECK(refused(R"({"config":{"WorkingDir":5}})") ==
        "the config of app:1: config.WorkingDir is a number, not a string");
  CHECK(refused(R"({"config":{"Labels":{"k":true}}})") ==
        "the config of app:1: config.Labels[\"k\"] is a boolean, not a string");
  CHECK(refused(R"({"config":{"ExposedPorts":["80/tcp"]}})") ==
        "the config of app:1: config.ExposedPorts is an array, not an object");

  // `stackbuild test` says the same, before it unpacks anything (the image has no layer blobs).
  TempDir dir;
  Store store(dir.path() / "store");
  FILE* devnull = fopen("/dev/null", "w");
  auto status = make_status(StatusMode::Plain, devnull);
  LayoutImage image{
      Digest::of_bytes("m"), "", "{}", R"({"config":{"WorkingDir":5}})", {dir.path() / "none"}};
  CHECK_THROWS_WITH(verify_image(store, image, "app:1", VerifyOptions{}, *status),
                    "the config of app:1: config.WorkingDir is a number, not a string");
  fclose(devnull);
}

TEST_CASE("GPU injection into an image: library directory, ldconfig folders, hook links, compat",
          "[verify][gpu]") {
  TempDir dir;
  fs::path root = dir.path() / "roots" / "img";
  test::write(root / "sbin/ldconfig", "", 0755);
  fs::create_directories(root / "usr/lib64");
  fs::create_directories(root / "usr/lib" / multiarch_tuple());
  fs::permissions(root / "usr/lib", fs::perms::owner_all | fs::perms::group_read |
                                        fs::perms::group_exec);  // 0750: kept in the upper layer
  const std::string multiarch = std::string("/usr/lib/") + multiarch_tuple();
  GpuInjection gpu;
  gpu.gpus.push_back({0, 0, "GPU-a", "H200", ""});
  gpu.driver_version = "535.104.05";
  gpu.mounts.push_back(
      {"usr/lib/libcuda.so.535.104.05", multiarch + "/libcuda.so.535.104.05", true});
  gpu.mounts.push_back({"usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"});
  FakeSandbox sb;
  RunOptions o;
  o.argv = {"/bin/true"};
  o.gpu = &gpu;
  auto run = [&] {
    sb.runs.clear();
    run_in_image(sb, ImageRoot(root), o, [](std::string_view) {});
    REQUIRE(sb.runs.size() == 2);  // ldconfig, then the command
    std::vector<std::string> targets;
    for (const auto& m : sb.runs[1].mounts) targets.push_back(m.target);
    return std::make_pair(targets, sb.runs[0].argv);
  };
  // Not Debian's (no /etc/debian_version): discovery's libraries go to
  // /usr/lib64, as libnvidia-container puts them; ldconfig looks there unasked.
  auto [targets, ld] = run();
  CHECK(targets ==
        std::vector<std::string>{"/usr/lib64/libcuda.so.535.104.05", "/usr/bin/nvidia-smi"});
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig"});
  // Debian's: the multiarch directory, also unasked.
  test::write(root / "etc/debian_version", "12.8\n");
  std::tie(targets, ld) = run();
  CHECK(targets[0] == multiarch + "/libcuda.so.535.104.05");
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig"});
  // A CDI spec's paths stay as written; ldconfig is told the folders it
  // would not look in (its update-ldcache hook's, and the libraries'), once.
  gpu.mounts = {{"usr/lib64/libcuda.so.535.104.05", "/usr/lib64/libcuda.so.535.104.05"},
                {"opt/nv/libnvidia-ml.so.535.104.05", "/opt/nv/libnvidia-ml.so.535.104.05"}};
  gpu.ldconfig_folders = {"/usr/lib64", multiarch};
  std::tie(targets, ld) = run();
  CHECK(targets[0] == "/usr/lib64/libcuda.so.535.104.05");
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig", "/usr/lib64", "/opt/nv"});
  // create-symlinks' links, made in the writable layer where the image's
  // links take them, its directories with the image's modes.
  fs::create_symlink("usr/lib", root / "lib");
  gpu.symlinks = {{"libcuda.so.1", "/lib/" + std::string(multiarch_tuple()) + "/libcuda.so"},
                  {"../card1", "/dev/dri/by-path/pci-0000:3b:00.0-card"}};
  std::vector<std::string> seen;
  sb.during = [&](const sandbox::SandboxSpec& spec) {
    if (spec.argv[0] != "/sbin/ldconfig") return;
    fs::path link = spec.upper / "usr/lib" / multiarch_tuple() / "libcuda.so";
    seen.push_back(fs::read_symlink(link).string());
    // /dev is the sandbox's own: its links are made there.
    CHECK_FALSE(fs::exists(spec.upper / "dev"));
    for (const auto& [name, target] : spec.device_links) seen.push_back(name + " -> " + target);
    CHECK((fs::status(spec.upper / "usr/lib").permissions() & fs::perms::all) ==
          (fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec));
    CHECK_FALSE(fs::exists(spec.upper / "lib"));
  };
  run();
  CHECK(seen ==
        std::vector<std::string>{"libcuda.so.1", "dri/by-path/pci-0000:3b:00.0-card -> ../card1"});
  // A directory where a link should go is refused, naming both.
  fs::create_directories(root / "usr/lib" / multiarch_tuple() / "libcuda.so");
  CHECK_THROWS_WITH(run_in_image(sb, ImageRoot(root), o, [](std::string_view) {}),
                    Catch::Contains("the image has a directory " + multiarch + "/libcuda.so"));
  fs::remove(root / "usr/lib" / multiarch_tuple() / "libcuda.so");
  gpu.symlinks.clear();
  sb.during = nullptr;
  // Compat: an image's libcuda of a newer branch comes first where asked for.
  test::write(root / "usr/local/cuda/compat/libcuda.so.550.54.15", "");
  test::write(root / "usr/local/cuda/compat/libcuda.so.1", "");
  gpu.ldconfig_folders.clear();
  gpu.mounts.resize(1);
  std::tie(targets, ld) = run();
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig", "/usr/lib64"});
  gpu.cuda_compat = true;
  std::tie(targets, ld) = run();
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig", "/usr/local/cuda/compat", "/usr/lib64"});
  gpu.driver_version = "550.54.15";  // not newer than the host's
  std::tie(targets, ld) = run();
  CHECK(ld == std::vector<std::string>{"/sbin/ldconfig", "/usr/lib64"});
}

TEST_CASE("where overlayfs takes no directory, a command runs in a full copy of the root",
          "[verify][gpu]") {
  TempDir dir;
  fs::path root = dir.path() / "roots" / "img";
  test::write(root / "sbin/ldconfig", "", 0755);
  test::write(root / "etc/data", "from the image");
  GpuInjection gpu;
  gpu.gpus.push_back({0, 0, "GPU-a", "H200", ""});
  gpu.symlinks = {{"libcuda.so.1", "/usr/lib64/libcuda.so"}};
  FakeSandbox sb;
  sb.overlay_refused = "mount -t overlay: Invalid argument";
  RunOptions o;
  o.argv = {"/bin/true"};
  o.gpu = &gpu;
  std::vector<std::string> seen;
  fs::path copy;
  sb.during = [&](const sandbox::SandboxSpec& spec) {
    CHECK(spec.lower.empty());
    CHECK(spec.upper.empty());
    REQUIRE_FALSE(spec.root.empty());
    if (copy.empty()) copy = spec.root;
    CHECK(spec.root == copy);  // ldconfig and the command share it
    seen.push_back(read_file(spec.root / "etc/data"));
    seen.push_back(fs::read_symlink(spec.root / "usr/lib64/libcuda.so").string());
  };
  run_in_image(sb, ImageRoot(root), o, [](std::string_view) {});
  CHECK(sb.runs.size() == 2);
  CHECK(seen == std::vector<std::string>{"from the image", "libcuda.so.1", "from the image",
                                         "libcuda.so.1"});
  CHECK_FALSE(fs::exists(copy));                // thrown away
  CHECK_FALSE(fs::exists(root / "usr/lib64"));  // the image untouched
  std::string w = full_copy_warning(sb, ImageRoot(root));
  CHECK_THAT(w, Catch::StartsWith("each command in the image runs in a full copy of its root"));
  CHECK_THAT(w, Catch::Contains((dir.path() / "roots").string() +
                                " (mount -t overlay: Invalid argument)"));
  CHECK_THAT(w, Catch::Contains(", /tmp (mount -t overlay: Invalid argument)"));
  sb.overlay_refused.clear();
  CHECK(full_copy_warning(sb, ImageRoot(root)).empty());
}

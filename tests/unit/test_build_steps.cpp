// Build steps without a real sandbox: the recipe keys, the steps'
// environment, and the orchestration (what the sandbox is asked, output,
// logs, failures, the layer cache) against a fake that records its specs and
// writes into the upper directory as a step would (ninja's FakeCommandRunner).
#include <catch2/catch.hpp>

#include <functional>

#include "build/steps.hpp"
#include "pipeline/library_paths.hpp"
#include "fakes.hpp"
#include "helpers.hpp"
#include "pipeline/build.hpp"

using namespace sb;

namespace {

class FakeSandbox final : public sandbox::Sandbox {
 public:
  std::vector<sandbox::SandboxSpec> runs;
  int fail_with = 0;  // exit status of a command holding "fail"
  std::function<void(const sandbox::SandboxSpec&)> on_run;  // looks at the root while a step runs

  sandbox::SandboxResult run(const sandbox::SandboxSpec& s, const sandbox::OutputFn& out) override {
    runs.push_back(s);
    if (on_run) on_run(s);
    const std::string cmd = s.argv.back();
    out("running " + cmd + "\nsecond line\n");
    if (cmd.find("fail") != std::string::npos) return {fail_with, false};
    test::write(s.upper / "out" / ("step" + std::to_string(runs.size())), cmd + "\n");
    return {0, false};
  }
};

Recipe recipe_in(const fs::path& dir, const std::string& yaml) {
  test::write(dir / "recipe.yaml", yaml);
  return load_recipe(dir / "recipe.yaml");
}

const char* const kRecipe =
    "stack: s\n"
    "layers:\n"
    "  - {name: base, copy: [{src: base/, dst: /}]}\n"
    "  - name: tools\n"
    "    build:\n"
    "      env: {CC: gcc}\n"
    "      workdir: /src\n"
    "      cache: [/root/.cache/ccache]\n"
    "      user: \"1000:100\"\n"
    "      timeout: 15m\n"
    "      run: [\"make all\", [/usr/bin/env, A=1, true]]\n";

}  // namespace

TEST_CASE("build: keys parse - and their mistakes are errors at their place", "[build][recipe]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "");
  Recipe r = recipe_in(tmp.path(), kRecipe);
  const BuildSpec& b = r.layers[1].build;
  CHECK(b.workdir == "/src");
  CHECK(b.cache == std::vector<std::string>{"/root/.cache/ccache"});
  CHECK(b.uid == 1000u);
  CHECK(b.gid == 100u);
  CHECK(b.timeout == 900);
  CHECK_FALSE(b.network);
  auto cmds = b.commands();
  REQUIRE(cmds.size() == 2);
  CHECK(cmds[0] == std::vector<std::string>{"/bin/sh", "-c", "make all"});
  CHECK(cmds[1] == std::vector<std::string>{"/usr/bin/env", "A=1", "true"});

  const std::pair<std::string, std::string> bad[] = {
      {"timeout: soon", "is a positive duration"},
      {"workdir: src", "must be an absolute path"},
      {"user: bob", "must be numeric"},
      {"cache: [/x/../y]", "must not contain '..'"},
      {"netwrok: true", "did you mean 'network'"},
      {"run: [[]]", "argv command in build.run is empty"},
  };
  for (const auto& [line, msg] : bad) {
    INFO(line);
    std::string y = "stack: s\nlayers:\n  - name: t\n    build:\n      " + line + "\n";
    if (line.rfind("run:", 0) != 0) y += "      run: true\n";
    CHECK_THROWS_WITH(recipe_in(tmp.path(), y), Catch::Contains(msg));
  }
}

TEST_CASE("the steps' environment: base - config.env - the point's variables - build.env",
          "[build][env]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "");
  Recipe r =
      recipe_in(tmp.path(), std::string(kRecipe) + "config: {env: {PATH: /opt/bin, CC: cc}}\n");
  auto env =
      step_environment(r, r.layers[1].build, {{"arch", "8.0;8.6+PTX;9.0a"}, {"cuda", "12.6"}}, 42);
  CHECK(env["PATH"] == "/opt/bin");
  CHECK(env["CC"] == "gcc");  // build.env wins over config.env
  CHECK(env["SOURCE_DATE_EPOCH"] == "42");
  CHECK(env["HOME"] == "/");  // user 1000
  CHECK(env["TORCH_CUDA_ARCH_LIST"] == "8.0;8.6+PTX;9.0a");
  CHECK(env["CMAKE_CUDA_ARCHITECTURES"] == "80-real;86;90a-real");
  CHECK(env["SB_ARCH"] == "8.0;8.6+PTX;9.0a");
  CHECK(env["CUDA_HOME"] == "/usr/local/cuda");
  CHECK(env["CUDA_VERSION"] == "12.6");
  CHECK(cache_dir_name("/root/.cache/pip") == "root_.cache_pip");
}

TEST_CASE("the steps' environment: where the layers below put cuDNN and NCCL", "[build][env]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "");
  const std::string head = "stack: s\nplatform: {python: \"3.12\", glibc: \"2.39\"}\nlayers:\n"
                           "  - {name: base, copy: [{src: base/, dst: /}]}\n";
  const std::string steps = "  - {name: fw, build: {run: make}}\n";
  const std::map<std::string, std::string> vars{{"cuda", "12.6.3"}, {"cudnn", "9.5.1.17"}, {"nccl", "2.23.4"}};
  auto paths = [&](const std::string& layers, std::map<std::string, std::string> v) {
    Recipe r = recipe_in(tmp.path(), head + layers + steps);
    return library_paths(r, r.layers.back(), v, PointInputs{});
  };

  SECTION("redist: the CUDA tree of the point's X.Y") {
    auto env = paths("  - {name: dl, use: [cudnn, nccl]}\n", vars);
    CHECK(env["CUDNN_ROOT"] == "/usr/local/cuda-12.6");
    CHECK(env["CUDNN_HOME"] == "/usr/local/cuda-12.6");
    CHECK(env["CUDNN_PATH"] == "/usr/local/cuda-12.6");
    CHECK(env["CUDNN_INCLUDE_DIR"] == "/usr/local/cuda-12.6/include");
    CHECK(env["CUDNN_LIB_DIR"] == "/usr/local/cuda-12.6/lib64");
    CHECK(env["NCCL_ROOT"] == "/usr/local/cuda-12.6");
    CHECK(env["NCCL_HOME"] == "/usr/local/cuda-12.6");
    CHECK(env["NCCL_INCLUDE_DIR"] == "/usr/local/cuda-12.6/include");
    CHECK(env["NCCL_LIB_DIR"] == "/usr/local/cuda-12.6/lib64");
    CHECK(env.size() == 9);
  }
  SECTION("wheels: site-packages/nvidia/<name>") {
    auto env = paths("  - {name: dl, use: [cudnn, nccl], from: wheel}\n", vars);
    CHECK(env["CUDNN_INCLUDE_DIR"] == "/usr/local/lib/python3.12/site-packages/nvidia/cudnn/include");
    CHECK(env["CUDNN_LIB_DIR"] == "/usr/local/lib/python3.12/site-packages/nvidia/cudnn/lib");
    CHECK(env["NCCL_ROOT"] == "/usr/local/lib/python3.12/site-packages/nvidia/nccl");
    CHECK(env["NCCL_LIB_DIR"] == "/usr/local/lib/python3.12/site-packages/nvidia/nccl/lib");
    // Named in pip:, the same.
    env = paths("  - {name: dl, pip: [nvidia-nccl-cu12==2.23.4]}\n", {});
    CHECK(env["NCCL_INCLUDE_DIR"] == "/usr/local/lib/python3.12/site-packages/nvidia/nccl/include");
    CHECK_FALSE(env.count("CUDNN_ROOT"));
    // Brought by another wheel (torch pulls nvidia-cudnn-cu12): for the components the point resolved.
    env = paths("  - {name: torch, use: pytorch, from: wheel}\n", {{"cudnn", "9.5.1.17"}});
    CHECK(env["CUDNN_LIB_DIR"] == "/usr/local/lib/python3.12/site-packages/nvidia/cudnn/lib");
    CHECK_FALSE(env.count("NCCL_ROOT"));
  }
  SECTION("apt: /usr/include and the architecture's multiarch directory") {
    auto env = paths("  - {name: dl, apt: [libcudnn9-dev-cuda-12, libnccl-dev]}\n", {});
    CHECK(env["CUDNN_INCLUDE_DIR"] == "/usr/include");
    CHECK(env["CUDNN_LIB_DIR"] == "/usr/lib/x86_64-linux-gnu");
    CHECK(env["NCCL_ROOT"] == "/usr");
    CHECK(env["NCCL_LIB_DIR"] == "/usr/lib/x86_64-linux-gnu");
    env = paths("  - {name: dl, use: nccl, from: apt}\n", vars);
    CHECK(env["NCCL_LIB_DIR"] == "/usr/lib/x86_64-linux-gnu");
  }
  SECTION("the topmost layer that installs one decides; layers above the steps do not count") {
    auto env = paths("  - {name: dl, use: [cudnn, nccl]}\n  - {name: n2, pip: [nvidia-nccl-cu12]}\n", vars);
    CHECK(env["CUDNN_ROOT"] == "/usr/local/cuda-12.6");
    CHECK(env["NCCL_ROOT"] == "/usr/local/lib/python3.12/site-packages/nvidia/nccl");
    Recipe r = recipe_in(tmp.path(), head + steps + "  - {name: dl, use: [cudnn, nccl]}\n");
    CHECK(library_paths(r, r.layers[1], vars, PointInputs{}).empty());
  }
  SECTION("nothing installs them: nothing is set") {
    CHECK(paths("  - {name: tools, apt: [make]}\n", vars).empty());
  }
  SECTION("between the variables and build.env") {
    Recipe r = recipe_in(tmp.path(), head + "  - {name: dl, use: [cudnn, nccl]}\n" +
                                         "  - {name: fw, build: {run: make, env: {NCCL_ROOT: /opt/nccl}}}\n");
    auto env = step_environment(r, r.layers.back().build, vars, 1, library_paths(r, r.layers.back(), vars, PointInputs{}));
    CHECK(env["NCCL_ROOT"] == "/opt/nccl");
    CHECK(env["NCCL_LIB_DIR"] == "/usr/local/cuda-12.6/lib64");
    CHECK(env["CUDNN_VERSION"] == "9.5.1.17");
  }
}

TEST_CASE("run_build_steps: what the sandbox is asked - output - logs - a failure's report",
          "[build][steps]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "");
  Recipe r = recipe_in(tmp.path(), kRecipe);
  fs::create_directories(tmp.path() / "lower/bin");
  StepsInput in;
  in.layer = "tools";
  in.spec = r.layers[1].build;
  in.env = {{"PATH", "/bin"}};
  in.lower = tmp.path() / "lower";
  in.scratch = tmp.path() / "scratch";
  in.cache_root = tmp.path() / "cache";
  in.log = tmp.path() / "logs/tools.log";
  FakeSandbox fake;
  test::RecordingStatus status;

  Changeset cs = run_build_steps(in, fake, status);
  REQUIRE(fake.runs.size() == 2);
  const auto& s = fake.runs[0];
  CHECK(s.lower == std::vector<fs::path>{in.lower});
  CHECK(s.upper == fake.runs[1].upper);  // one upper directory for all the layer's steps
  CHECK(s.cwd == "/src");
  CHECK(s.uid == 1000u);
  CHECK(s.gid == 100u);
  CHECK(s.timeout_seconds == 900);
  CHECK_FALSE(s.network);
  CHECK(s.env == in.env);
  REQUIRE(s.mounts.size() == 1);
  CHECK(s.mounts[0].source == tmp.path() / "cache/root_.cache_ccache");
  CHECK(s.mounts[0].target == "/root/.cache/ccache");
  CHECK_FALSE(s.mounts[0].read_only);
  CHECK(fs::is_directory(s.mounts[0].source));
  CHECK(fs::exists(cs.root / "out/step1"));
  CHECK(fs::exists(cs.root / "out/step2"));
  auto messages = status.messages();
  CHECK(std::count(messages.begin(), messages.end(), "tools | second line") == 2);
  CHECK(test::slurp(in.log).find("running make all\n") != std::string::npos);

  in.spec.run.push_back({"echo fail now", {}});
  in.scratch = tmp.path() / "scratch2";
  fake.fail_with = 3;
  try {
    run_build_steps(in, fake, status);
    FAIL("a failing step did not fail the build");
  } catch (const BuildError& e) {
    CHECK(e.exit_status() == 3);
    CHECK(e.log() == in.log);
    CHECK_THAT(e.what(), Catch::Contains("step 3 of 3 ('echo fail now') exited with status 3"));
    CHECK_THAT(e.what(), Catch::Contains("running echo fail now"));
    CHECK_THAT(e.what(), Catch::Contains(in.log.string()));
  }
}

TEST_CASE(
    "step layers are cached by parent - spec and environment: only changed layers and those above "
    "rebuild",
    "[build][cache]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "#!\n", 0755);
  auto yaml = [](const std::string& top_env) {
    return std::string("stack: s\nlayers:\n  - {name: base, copy: [{src: base/, dst: /}]}\n") +
           "  - {name: mid, build: {run: \"make mid\"}}\n" + "  - {name: top, build: {env: {X: \"" +
           top_env + "\"}, run: \"make top\"}}\n";
  };
  Store store(tmp.path() / "store");
  FakeSandbox fake;
  BuildOptions o;
  o.services.sandbox = &fake;
  o.output = tmp.path() / "out";

  BuildResult first = build_recipe(recipe_in(tmp.path(), yaml("1")), store, o, null_status());
  CHECK(fake.runs.size() == 2);
  REQUIRE(first.layers.size() == 3);
  CHECK_FALSE(first.layers[2].cached);
  CHECK(fs::is_directory(fake.runs[1].lower.at(0) / "bin"));  // the layers below, unpacked

  BuildResult again = build_recipe(recipe_in(tmp.path(), yaml("1")), store, o, null_status());
  CHECK(fake.runs.size() == 2);  // nothing ran
  for (const auto& l : again.layers) CHECK(l.cached);
  CHECK(again.images.at(0).image.manifest.digest == first.images.at(0).image.manifest.digest);

  BuildResult edited = build_recipe(recipe_in(tmp.path(), yaml("2")), store, o, null_status());
  CHECK(fake.runs.size() == 3);  // the top layer alone
  CHECK(edited.layers[1].cached);
  CHECK_FALSE(edited.layers[2].cached);

  o.variables = {{"cuda", "12.6"}};  // the point's variables are in every step's environment
  build_recipe(recipe_in(tmp.path(), yaml("2")), store, o, null_status());
  CHECK(fake.runs.size() == 5);
  CHECK(fake.runs.back().env.at("CUDA_VERSION") == "12.6");
}

TEST_CASE("a layer built from a source tree: patched - kept or bound - cached by its contents",
          "[build][source]") {
  TempDir tmp;
  test::write(tmp.path() / "base/bin/sh", "#!\n", 0755);
  test::write(tmp.path() / "demo/src/config", "greeting=hello\n");
  test::write(tmp.path() / "fix.patch",
              "--- a/src/config\n+++ b/src/config\n@@ -1 +1 @@\n-greeting=hello\n+greeting=patched\n");
  auto yaml = [](const std::string& keep) {
    return std::string("stack: s\nlayers:\n  - {name: base, copy: [{src: base/, dst: /}]}\n") +
           "  - {name: demo, source: {path: demo}, patches: [fix.patch], " + keep + "build: {run: make}}\n";
  };
  Store store(tmp.path() / "store");
  FakeSandbox fake;
  BuildOptions o;
  o.services.sandbox = &fake;
  o.output = tmp.path() / "out";

  std::string seen;  // src/config as the step sees it: in the upper directory, or in the bound tree
  fake.on_run = [&](const sandbox::SandboxSpec& s) {
    fs::path f = s.mounts.empty() ? s.upper / "opt/demo/src/config" : s.mounts[0].source / "src/config";
    seen = fs::exists(f) ? test::slurp(f) : "<missing " + f.string() + ">";
    if (!s.mounts.empty()) seen += fs::exists(s.upper / "usr/src/demo") ? " (also in the upper)" : "";
  };
  BuildResult kept = build_recipe(recipe_in(tmp.path(), yaml("keep_source: /opt/demo, ")), store, o, null_status());
  REQUIRE(fake.runs.size() == 1);
  CHECK(fake.runs[0].cwd == "/opt/demo");  // the steps run in the tree
  CHECK(fake.runs[0].mounts.empty());
  CHECK(seen == "greeting=patched\n");
  CHECK(test::slurp(tmp.path() / "demo/src/config") == "greeting=hello\n");  // the recipe's tree is untouched

  BuildResult again = build_recipe(recipe_in(tmp.path(), yaml("keep_source: /opt/demo, ")), store, o, null_status());
  CHECK(fake.runs.size() == 1);
  CHECK(again.layers[1].cached);
  CHECK(again.layers[1].layer.digest == kept.layers[1].layer.digest);

  test::write(tmp.path() / "demo/src/other", "x\n");  // an edited tree rebuilds the layer
  BuildResult edited = build_recipe(recipe_in(tmp.path(), yaml("keep_source: /opt/demo, ")), store, o, null_status());
  CHECK(fake.runs.size() == 2);
  CHECK_FALSE(edited.layers[1].cached);
  CHECK(edited.layers[1].layer.digest != kept.layers[1].layer.digest);

  build_recipe(recipe_in(tmp.path(), yaml("")), store, o, null_status());
  REQUIRE(fake.runs.size() == 3);
  const auto& s = fake.runs[2];
  CHECK(s.cwd == "/usr/src/demo");
  REQUIRE(s.mounts.size() == 1);  // bound from outside: not in the layer
  CHECK(s.mounts[0].target == "/usr/src/demo");
  CHECK_FALSE(s.mounts[0].read_only);
  CHECK(seen == "greeting=patched\n");  // and not in the upper directory

  test::write(tmp.path() / "fix.patch", "--- a/src/config\n+++ b/src/config\n@@ -1 +1 @@\n-nothing\n+x\n");
  CHECK_THROWS_WITH(build_recipe(recipe_in(tmp.path(), yaml("")), store, o, null_status()),
                    Catch::Contains("patch -p1"));
}

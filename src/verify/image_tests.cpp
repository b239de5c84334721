#include "verify/image_tests.hpp"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/glob.hpp"
#include "verify/run_in_image.hpp"

namespace sb::verify {

using json = nlohmann::json;

std::string tests_label(const Recipe& recipe, const std::vector<std::string>& components) {
  json tests = json::array();
  for (const auto& t : recipe.tests) {
    json j{{"name", t.name}, {"run", t.run.value}};
    if (t.gpu) j["gpu"] = true;
    if (!t.expect.value.empty()) j["expect"] = t.expect.value;
    if (t.exit != 0) j["exit"] = t.exit;
    if (t.timeout) j["timeout"] = t.timeout;
    tests.push_back(j);
  }
  json builtin = json::array();
  for (const auto& c : builtin_test_components())
    if (recipe.builtin_tests.on(c) && std::find(components.begin(), components.end(), c) != components.end())
      builtin.push_back(c);
  const StaticChecksSpec& sc = recipe.static_checks;
  if (tests.empty() && builtin.empty() && sc.empty()) return "";
  json label{{"tests", tests}, {"builtin", builtin}};
  if (!sc.empty()) {  // only when given: the labels of images without it stay as they were
    json s = json::object();
    if (!sc.arch_ignore.empty()) s["arch_ignore"] = sc.arch_ignore;
    if (!sc.libraries_ignore.empty()) s["libraries_ignore"] = sc.libraries_ignore;
    label["static_checks"] = s;
  }
  return label.dump();
}

RecordedTests parse_tests_label(const std::string& value) {
  RecordedTests r;
  if (value.empty()) return r;
  try {
    json j = json::parse(value);
    for (const auto& t : j.value("tests", json::array())) {
      TestSpec s;
      s.name = t.at("name").get<std::string>();
      s.run.value = t.at("run").get<std::string>();
      s.gpu = t.value("gpu", false);
      s.expect.value = t.value("expect", std::string());
      s.exit = t.value("exit", 0);
      s.timeout = t.value("timeout", int64_t{0});
      r.tests.push_back(std::move(s));
    }
    for (const auto& b : j.value("builtin", json::array())) r.builtin.push_back(b.get<std::string>());
    json sc = j.value("static_checks", json::object());
    for (const auto& [key, list] : sc.items()) {
      if (key != "arch_ignore" && key != "libraries_ignore")
        throw Error(std::string("the image's label ") + kTestsLabel + " is malformed: unknown static_checks key '" +
                    key + "'");
      for (const auto& g : list) {
        std::string glob = g.get<std::string>();
        if (std::string why = glob_error(glob); !why.empty())
          throw Error(std::string("the image's label ") + kTestsLabel + " is malformed: static_checks." + key +
                      " '" + glob + "' is not a glob: " + why);
        (key == "arch_ignore" ? r.arch_ignore : r.libraries_ignore).push_back(glob);
      }
    }
  } catch (const json::exception& e) {
    throw Error(std::string("the image's label ") + kTestsLabel + " is malformed: " + e.what());
  }
  return r;
}

ImageTest from_spec(const TestSpec& spec) {
  ImageTest t;
  t.name = "recipe: " + spec.name;
  t.kind = "recipe";
  t.argv = {"/bin/sh", "-c", spec.run.value};
  t.gpu = spec.gpu;
  t.expect = spec.expect.value;
  t.exit = spec.exit;
  t.timeout = spec.timeout;
  return t;
}

namespace {

// The last lines of a command's output, for a report.
std::vector<std::string> tail_lines(const std::string& out, size_t n) {
  std::vector<std::string> lines;
  size_t end = out.size();
  while (end > 0 && out[end - 1] == '\n') --end;
  while (end > 0 && lines.size() < n) {
    size_t start = out.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    lines.insert(lines.begin(), out.substr(start, end - start));
    end = start == 0 ? 0 : start - 1;
  }
  return lines;
}

// What a built-in test reported, from the JSON line it prints last
// ({"test": ..., "version": ..., "cuda": ..., "ok": true}): "version 2.7.0,
// cuda 12.6, ..." for the report. Empty when there is no such line.
std::string builtin_summary(const std::string& output) {
  auto lines = tail_lines(output, 5);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    auto j = nlohmann::json::parse(*it, nullptr, false);
    if (!j.is_object() || !j.contains("test")) continue;
    std::string out;
    for (const auto& [k, v] : j.items()) {
      if (k == "test" || k == "ok" || v.is_null()) continue;
      out += (out.empty() ? "" : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    return out;
  }
  return "";
}

}  // namespace

TestResult judge(const ImageTest& test, const sandbox::SandboxResult& r, const std::string& output, double seconds) {
  TestResult t{test.name, test.kind, Outcome::Passed, "", {}, seconds};
  int64_t timeout = test.timeout ? test.timeout : kDefaultTestTimeout;
  if (r.timed_out)
    t.message = "ran past its timeout of " + std::to_string(timeout) + "s and was killed";
  else if (r.exit_status != test.exit)
    t.message = "exited with status " + std::to_string(r.exit_status) + ", expected " + std::to_string(test.exit);
  else if (!test.expect.empty() && output.find(test.expect) == std::string::npos)
    t.message = "its output does not contain '" + test.expect + "'";
  if (!t.message.empty()) {
    t.outcome = Outcome::Failed;
    t.details = tail_lines(output, 20);
  } else if (test.kind == "builtin") {
    t.message = builtin_summary(output);
  }
  return t;
}

std::vector<TestResult> run_tests(sandbox::Sandbox& sandbox, const ImageRoot& root, const std::vector<ImageTest>& tests,
                                  const TestEnvironment& env) {
  std::vector<TestResult> out;
  for (const auto& test : tests) {
    if (test.gpu && !env.gpu) {
      out.push_back({test.name, test.kind, Outcome::Skipped, env.no_gpu_reason, {}, 0});
      continue;
    }
    if (!env.cannot_run.empty()) {
      out.push_back({test.name, test.kind, Outcome::Skipped, env.cannot_run, {}, 0});
      continue;
    }
    if (!test.unavailable.empty()) {
      out.push_back({test.name, test.kind, Outcome::Failed, test.unavailable, {}, 0});
      continue;
    }
    RunOptions o;
    o.argv = test.argv;
    o.env = env.env;
    for (const auto& [k, v] : test.env) o.env[k] = v;
    o.cwd = env.cwd;
    o.gpu = test.gpu ? env.gpu : nullptr;
    o.host_root = env.host_root;
    o.timeout_seconds = test.timeout ? test.timeout : kDefaultTestTimeout;
    o.mounts = test.mounts;
    o.architecture = env.architecture;
    std::string output;
    const size_t kKeep = 4u << 20;  // the output kept for `expect` and the report
    auto start = std::chrono::steady_clock::now();
    try {
      auto r = run_in_image(sandbox, root, o, [&](std::string_view s) {
        if (output.size() < kKeep) output.append(s.substr(0, kKeep - output.size()));
      });
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      out.push_back(judge(test, r, output, secs));
      if (!env.emulated.empty())
        out.back().message += (out.back().message.empty() ? "" : " ") + std::string("(emulated: ") + env.emulated + ")";
    } catch (const Error& e) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      out.push_back({test.name, test.kind, Outcome::Failed, std::string("could not run: ") + e.what(), {}, secs});
    }
  }
  return out;
}

}  // namespace sb::verify

// What verification found: one result per check or test, rendered as a
// summary table, JSON, or JUnit XML for CI. A GPU test on a host without a
// GPU is Skipped, never Passed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sb::verify {

enum class Outcome { Passed, Failed, Skipped };
std::string to_string(Outcome o);

struct TestResult {
  std::string name;      // e.g. "static: libraries resolve", "recipe: imports"
  std::string kind;      // "static", "recipe", "builtin"
  Outcome outcome = Outcome::Passed;
  std::string message;   // why it failed or was skipped; empty when it passed
  std::vector<std::string> details;  // e.g. each unresolved library
  double seconds = 0;
};

struct VerifyReport {
  std::string image;     // what was tested: "out/hello:1.0"
  std::vector<TestResult> results;
  std::string gpus;      // what the GPU tests ran on: "1x NVIDIA H200, driver 570.86.15"; "" without a GPU
  // With VerifyOptions::record_opened: the image's files its tests opened,
  // first opened first ("usr/lib/libx.so"; verify/opened_files.hpp).
  std::optional<std::vector<std::string>> opened;

  int count(Outcome o) const;
  bool ok() const { return count(Outcome::Failed) == 0; }
};

void to_json(nlohmann::json& j, const TestResult& r);
void to_json(nlohmann::json& j, const VerifyReport& r);
std::string junit_xml(const VerifyReport& r);
std::string junit_xml(const std::vector<VerifyReport>& reports);  // a testsuite each
std::string summary_table(const VerifyReport& r);

// --report FILE (JSON: the report, or an array when several) and --junit
// FILE (JUnit XML), each written atomically when given.
void write_report_files(const std::vector<VerifyReport>& reports, const std::optional<std::filesystem::path>& json_file,
                        const std::optional<std::filesystem::path>& junit_file);

}  // namespace sb::verify

// The gate of a build: before anything is pushed (or with --verify), each
// image built is verified as `stackbuild test` verifies it, and a failed
// check or test stops the push.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "store/store.hpp"
#include "util/error.hpp"
#include "util/status.hpp"
#include "verify/report.hpp"
#include "verify/verify_image.hpp"

namespace sb {

struct MatrixResult;

struct GateOptions {
  bool verify = false;  // --verify: test the images even without a push
  bool skip = false;    // --no-verify: push without testing them
  verify::VerifyOptions verify_options;           // --gpus, --nvcc
  std::optional<fs::path> report_file;            // --report FILE
  std::optional<fs::path> junit_file;             // --junit FILE
};

// Where a finished report goes for people: the CLI prints its table, or in
// JSON mode a "verify" event (stage code never prints).
using ShowReport = std::function<void(const verify::VerifyReport&)>;

// With `pushing` or options.verify (and not options.skip), verifies each
// distinct image of each built point: point i's reports go to reports[i],
// its counts ("3 passed, 2 skipped") to built.points[i].tests. Returns the
// failure (naming image and test) for the caller to throw after the summary.
std::optional<Error> gate_build(MatrixResult& built, const GateOptions& options, bool pushing, const Store& store,
                                Status& status, const ShowReport& show,
                                std::vector<std::vector<verify::VerifyReport>>& reports);

}  // namespace sb

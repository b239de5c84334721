#include "pipeline/verify_gate.hpp"

#include <set>

#include "pipeline/matrix_build.hpp"

namespace sb {

namespace {

// One report per distinct image of a point (one image under several tags is tested once).
std::vector<verify::VerifyReport> verify_built(const BuildResult& built, const GateOptions& options,
                                               const Store& store, Status& status, const ShowReport& show) {
  std::vector<verify::VerifyReport> reports;
  std::set<Digest> seen;
  for (const auto& ti : built.images) {
    if (!seen.insert(ti.image.manifest.digest).second) continue;
    std::vector<Digest> layers;
    for (const auto& l : ti.image.layers) layers.push_back(l.digest);
    auto img = verify::stored_image(store, ti.image.manifest_json, ti.image.config_json, ti.image.manifest.digest, layers);
    reports.push_back(verify::verify_image(store, img, ti.tag, options.verify_options, status));
    if (show) show(reports.back());
  }
  return reports;
}

// "3 passed, 1 failed, 2 skipped", for the summary.
std::string counts(const std::vector<verify::VerifyReport>& reports) {
  int n[3] = {0, 0, 0};
  for (const auto& rep : reports) {
    n[0] += rep.count(verify::Outcome::Passed);
    n[1] += rep.count(verify::Outcome::Failed);
    n[2] += rep.count(verify::Outcome::Skipped);
  }
  std::string s = std::to_string(n[0]) + " passed";
  if (n[1]) s += ", " + std::to_string(n[1]) + " failed";
  if (n[2]) s += ", " + std::to_string(n[2]) + " skipped";
  return s;
}

}  // namespace

std::optional<Error> gate_build(MatrixResult& built, const GateOptions& options, bool pushing, const Store& store,
                                Status& status, const ShowReport& show,
                                std::vector<std::vector<verify::VerifyReport>>& reports) {
  if (options.skip) {
    if (pushing) status.message(Level::Warning, "--no-verify: pushing without running the images' tests");
    return std::nullopt;
  }
  if (!pushing && !options.verify) return std::nullopt;
  std::vector<verify::VerifyReport> all;
  for (size_t i = 0; i < built.points.size(); ++i) {
    auto& p = built.points[i];
    if (!p.built) continue;
    reports[i] = verify_built(*p.built, options, store, status, show);
    p.tests = counts(reports[i]);
    all.insert(all.end(), reports[i].begin(), reports[i].end());
  }
  verify::write_report_files(all, options.report_file, options.junit_file);
  auto d = verify::gate(all, false);
  if (d.push) return std::nullopt;
  return Error(pushing ? d.message : "verification failed:\n" + d.message);
}

}  // namespace sb

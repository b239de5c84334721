#include "verify/report.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "util/file.hpp"
#include "util/utf8.hpp"

namespace sb::verify {

std::string to_string(Outcome o) {
  switch (o) {
    case Outcome::Passed: return "passed";
    case Outcome::Failed: return "failed";
    case Outcome::Skipped: return "skipped";
  }
  return "?";
}

int VerifyReport::count(Outcome o) const {
  int n = 0;
  for (const auto& r : results) n += r.outcome == o ? 1 : 0;
  return n;
}

// Reports name files of the image, and a name is bytes that need not be
// UTF-8 (a base image's): JSON and XML get every text in its shown form.
void to_json(nlohmann::json& j, const TestResult& r) {
  j = nlohmann::json{{"name", printable_utf8(r.name)},
                     {"kind", r.kind},
                     {"outcome", to_string(r.outcome)},
                     {"seconds", r.seconds}};
  if (!r.message.empty()) j["message"] = printable_utf8(r.message);
  if (!r.details.empty()) {
    j["details"] = nlohmann::json::array();
    for (const auto& d : r.details) j["details"].push_back(printable_utf8(d));
  }
}

void to_json(nlohmann::json& j, const VerifyReport& r) {
  j = nlohmann::json{{"image", printable_utf8(r.image)},
                     {"results", r.results},
                     {"summary",
                      {{"passed", r.count(Outcome::Passed)},
                       {"failed", r.count(Outcome::Failed)},
                       {"skipped", r.count(Outcome::Skipped)}}}};
  if (!r.gpus.empty()) j["gpus"] = printable_utf8(r.gpus);
}

static std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : printable_utf8(text)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:  // XML 1.0 has no other control characters, not even escaped
        out += static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r' ? '?' : c;
    }
  }
  return out;
}

static std::string junit_suite(const VerifyReport& r) {
  double total = 0;
  for (const auto& t : r.results) total += t.seconds;
  char head[512];
  snprintf(head, sizeof head, "<testsuite name=\"%s\" tests=\"%zu\" failures=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
           xml_escape("stackbuild test " + r.image).c_str(), r.results.size(), r.count(Outcome::Failed),
           r.count(Outcome::Skipped), total);
  std::string out = head;
  for (const auto& t : r.results) {
    char line[64];
    snprintf(line, sizeof line, "%.3f", t.seconds);
    out += "  <testcase classname=\"" + xml_escape(t.kind) + "\" name=\"" + xml_escape(t.name) + "\" time=\"" + line +
           "\"";
    std::string body;
    for (const auto& d : t.details) body += d + "\n";
    if (t.outcome == Outcome::Passed) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    if (t.outcome == Outcome::Failed)
      out += "    <failure message=\"" + xml_escape(t.message) + "\">" + xml_escape(body) + "</failure>\n";
    else
      out += "    <skipped message=\"" + xml_escape(t.message) + "\"/>\n";
    out += "  </testcase>\n";
  }
  out += "</testsuite>\n";
  return out;
}

std::string junit_xml(const std::vector<VerifyReport>& reports) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  for (const auto& r : reports) out += junit_suite(r);
  return out + "</testsuites>\n";
}

std::string junit_xml(const VerifyReport& r) { return junit_xml(std::vector<VerifyReport>{r}); }

std::string summary_table(const VerifyReport& r) {
  size_t width = 4;
  for (const auto& t : r.results) width = std::max(width, printable_utf8(t.name).size());
  // Named: `test RECIPE` and the build's gate print one table per image.
  std::string out = "image " + printable_utf8(r.image) + "\n";
  char line[1024];
  for (const auto& t : r.results) {
    snprintf(line, sizeof line, "%-7s  %-*s  %s\n", to_string(t.outcome).c_str(), static_cast<int>(width),
             printable_utf8(t.name).c_str(), printable_utf8(t.message).c_str());
    out += line;
    for (size_t i = 0; i < t.details.size() && i < 20; ++i) out += "           " + printable_utf8(t.details[i]) + "\n";
    if (t.details.size() > 20) out += "           ... and " + std::to_string(t.details.size() - 20) + " more\n";
  }
  snprintf(line, sizeof line, "%d passed, %d failed, %d skipped\n", r.count(Outcome::Passed),
           r.count(Outcome::Failed), r.count(Outcome::Skipped));
  out += line;
  return out;
}

void write_report_files(const std::vector<VerifyReport>& reports, const std::optional<std::filesystem::path>& json_file,
                        const std::optional<std::filesystem::path>& junit_file) {
  if (json_file)
    write_file_atomic(*json_file,
                      (reports.size() == 1 ? nlohmann::json(reports.front()) : nlohmann::json(reports)).dump(2) + "\n");
  if (junit_file) write_file_atomic(*junit_file, junit_xml(reports));
}

}  // namespace sb::verify

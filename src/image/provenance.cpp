#include "image/provenance.hpp"

#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "util/error.hpp"
#include "util/version.hpp"

namespace sb::provenance {

using json = nlohmann::json;

void to_json(json& j, const Resource& r) {
  j = json::object();
  if (!r.name.empty()) j["name"] = r.name;
  if (!r.uri.empty()) j["uri"] = r.uri;
  if (!r.digest.empty()) j["digest"] = r.digest;
  if (!r.download_location.empty()) j["downloadLocation"] = r.download_location;
  if (!r.media_type.empty()) j["mediaType"] = r.media_type;
  if (!r.annotations.empty()) j["annotations"] = r.annotations;
}

void to_json(json& j, const Parameters& p) {
  j = json{{"recipe", p.recipe}, {"locked", p.locked}};
  if (!p.point.empty()) j["point"] = p.point;
  if (!p.matrix.empty()) {
    json m = json::object();
    for (const auto& [k, v] : p.matrix) m[k] = v;
    j["matrix"] = m;
  }
  if (!p.only.empty()) j["only"] = p.only;
  if (!p.set.empty()) j["set"] = p.set;
  if (!p.tags.empty()) j["tags"] = p.tags;
  if (!p.catalog.empty()) j["catalog"] = p.catalog;
  if (!p.architecture.empty()) j["architecture"] = p.architecture;
  j["sourceDateEpoch"] = p.source_date_epoch;
  if (!p.compression.empty()) {
    j["compression"] = {{"algorithm", p.compression}};
    if (p.level >= 0) j["compression"]["level"] = p.level;
  }
  if (p.layer_budget) j["layerBudget"] = *p.layer_budget;
  if (p.allow_host_paths) j["allowHostPaths"] = true;
}

std::string timestamp(std::chrono::system_clock::time_point t) {
  return rfc3339(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

std::string new_invocation_id() {
  std::random_device rd;
  unsigned char b[16];
  for (size_t i = 0; i < sizeof b; i += 4) {
    uint32_t v = rd();
    for (size_t k = 0; k < 4; ++k) b[i + k] = static_cast<unsigned char>(v >> (8 * k));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // the RFC 4122 variant
  char out[37];
  snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
           b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return std::string("urn:uuid:") + out;
}

std::string without_login(const std::string& url) {
  std::string u = url.substr(0, url.find('#'));
  size_t scheme = u.find("://");
  if (scheme == std::string::npos) return u;
  size_t host = scheme + 3;
  size_t end = u.find_first_of("/?", host);
  size_t at = u.rfind('@', end == std::string::npos ? u.size() : end);
  if (at != std::string::npos && at >= host) u.erase(host, at + 1 - host);
  return u;
}

std::string statement_json(const Provenance& p) {
  // In the order the specifications list the fields, for people reading it.
  using ordered = nlohmann::ordered_json;
  ordered subjects = ordered::array();
  for (const auto& name : p.subject_names)
    subjects.push_back({{"name", name}, {"digest", {{"sha256", p.subject.hex()}}}});
  ordered build{{"buildType", kBuildType},
                {"externalParameters", json(p.parameters)},
                {"internalParameters", {{"stackbuildVersion", kStackbuildVersion}}},
                {"resolvedDependencies", json(p.dependencies)}};
  ordered run{{"builder", {{"id", p.run.builder_id}, {"version", {{"stackbuild", kStackbuildVersion}}}}},
              {"metadata",
               {{"invocationId", p.run.invocation_id},
                {"startedOn", timestamp(p.run.started)},
                {"finishedOn", timestamp(p.run.finished)}}}};
  if (!p.byproducts.empty()) run["byproducts"] = json(p.byproducts);
  ordered statement{{"_type", kStatementType},
                    {"subject", subjects},
                    {"predicateType", kPredicateType},
                    {"predicate", {{"buildDefinition", build}, {"runDetails", run}}}};
  return statement.dump(2) + "\n";
}

Read read_statement(const std::string& text) {
  Read out;
  try {
    json j = json::parse(text);
    if (!j.is_object() || j.value("_type", "") != kStatementType)
      throw Error(std::string("not an in-toto statement (its _type is not ") + kStatementType + ")", ErrorKind::Input);
    out.predicate_type = j.value("predicateType", "");
    for (const auto& s : j.value("subject", json::array())) {
      std::string hex = s.is_object() && s.contains("digest") && s["digest"].is_object()
                            ? s["digest"].value("sha256", "")
                            : "";
      out.subjects.emplace_back(s.is_object() ? s.value("name", "") : "", hex.empty() ? "" : "sha256:" + hex);
    }
  } catch (const json::exception& e) {
    throw Error(std::string("the statement is not JSON of the in-toto shape: ") + e.what(), ErrorKind::Input);
  }
  return out;
}

void check_statement_of(const std::string& text, const Digest& image) {
  Read r = read_statement(text);
  if (r.predicate_type != kPredicateType)
    throw Error("the statement's predicateType is '" + r.predicate_type + "', not " + kPredicateType,
                ErrorKind::Input);
  std::string named;
  for (const auto& [name, digest] : r.subjects) {
    if (digest == image.str()) return;
    named += (named.empty() ? "" : ", ") + name + "@" + (digest.empty() ? "(no sha256)" : digest);
  }
  throw Error("the provenance is not of " + image.str() + ": its subjects are " + (named.empty() ? "none" : named),
              ErrorKind::Input);
}

}  // namespace sb::provenance

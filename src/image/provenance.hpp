// An image's SLSA provenance: an in-toto Statement v1 whose subject is the
// image's manifest (by its names and sha256 digest) and whose predicate is a
// SLSA Provenance v1 predicate (https://slsa.dev/spec/v1.0/provenance): how
// stackbuild built it (buildType, the parameters it was given, the recipe,
// lockfile, catalog, base image and every package, wheel, archive and source
// tree its layers were made from, by digest) and this run (builder,
// invocation, times, and the test reports and SBOMs made beside the image).
// This file writes and reads the document; pipeline/provenance.cpp says what
// goes into it. It is kept beside the image as an OCI artifact of
// artifactType application/vnd.in-toto+json, as BuildKit and cosign keep
// theirs, never inside it: its times are the run's, and the image stays the
// same bytes.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/digest.hpp"

namespace sb::provenance {

constexpr const char* kStatementType = "https://in-toto.io/Statement/v1";
constexpr const char* kPredicateType = "https://slsa.dev/provenance/v1";
// The media type of an in-toto statement: the artifact's type and its one layer's.
constexpr const char* kMediaType = "application/vnd.in-toto+json";
// What buildDefinition means: a stackbuild recipe built at one matrix point
// (docs/provenance.md, "The build type", says what each parameter is).
constexpr const char* kBuildType = "https://stackbuild.dev/provenance/recipe/v1";
// runDetails.builder.id unless --builder-id says otherwise: stackbuild run by
// whoever ran it, on their own machine (SLSA Build L1: no hosted platform
// stands behind the document).
constexpr const char* kLocalBuilderId = "https://stackbuild.dev/provenance/builder/local/v1";

// A SLSA/in-toto ResourceDescriptor: something the build read (a
// resolvedDependency) or made beside the image (a byproduct). At least one
// of uri and a digest is set.
struct Resource {
  std::string name;               // a file name, a path as the recipe names it, a reference
  std::string uri;                // what it is, globally: a Package URL, git+URL@REF, a URL
  std::string download_location;  // where it was fetched from, when that is not `uri` (no login)
  std::map<std::string, std::string> digest;  // algorithm -> lowercase hex: sha256, gitCommit, ...
  std::string media_type;
  std::map<std::string, std::string> annotations;  // "kind" (recipe, apt, pip, ...), "layer"

  Resource& sha256(const Digest& d) {
    digest["sha256"] = d.hex();
    return *this;
  }
};
void to_json(nlohmann::json& j, const Resource& r);

// externalParameters: what the person or CI job that ran stackbuild chose.
// Parameters that were not given are left out.
struct Parameters {
  std::string recipe;                                       // the recipe's path, as given
  std::string point;                                        // the matrix point's id; "" without a matrix
  std::vector<std::pair<std::string, std::string>> matrix;  // its values, as the recipe writes them
  std::vector<std::string> only;                            // --only KEY=VALUE
  std::vector<std::string> set;                             // --set KEY=VALUE
  bool locked = false;                                      // --locked: built from RECIPE.lock's pins
  std::vector<std::string> tags;                            // the image's tags
  std::string catalog;                                      // the catalog directory planned with; "" = none
  std::string architecture;                                 // the image's (OCI name)
  int64_t source_date_epoch = 0;                            // the image's timestamp
  std::string compression;                                  // gzip, zstd, none
  int level = -1;                                           // --level; -1: the algorithm's default
  std::optional<uint64_t> layer_budget;                     // --layer-budget, when given
  bool allow_host_paths = false;                            // --allow-host-paths
};
void to_json(nlohmann::json& j, const Parameters& p);

// This run: who built it, which invocation, when. Real times: the document
// is not part of the image, and a provenance says when the build ran.
struct Run {
  std::string builder_id = kLocalBuilderId;
  std::string invocation_id;  // "urn:uuid:...", one for every image of one run
  std::chrono::system_clock::time_point started, finished;
};

struct Provenance {
  std::vector<std::string> subject_names;  // the image's tags ("hello:1.0"); one subject each
  Digest subject;                          // its manifest's digest
  Parameters parameters;
  std::vector<Resource> dependencies;      // resolvedDependencies, in the order they were used
  std::vector<Resource> byproducts;        // the test reports and SBOMs of this run
  Run run;
};

// The statement: in-toto Statement v1, SLSA Provenance v1 predicate;
// indented JSON ending in a newline.
std::string statement_json(const Provenance& p);

// "2026-12-03T14:20:01Z", to the second, as the SLSA schema writes a time.
std::string timestamp(std::chrono::system_clock::time_point t);

// A fresh "urn:uuid:<version 4 UUID>" for runDetails.metadata.invocationId.
std::string new_invocation_id();

// `url` without a login (https://user:secret@host/x -> https://host/x) and
// without a fragment (a wheel URL's #sha256=...): what a document may say of
// where something was fetched from.
std::string without_login(const std::string& url);

// What a statement says of its subjects and predicate, read back.
struct Read {
  std::string predicate_type;
  std::vector<std::pair<std::string, std::string>> subjects;  // name, "sha256:<hex>" ("" without one)
};
// Reads an in-toto Statement v1 (throws sb::Error, exit 3, for anything else).
Read read_statement(const std::string& text);

// Throws sb::Error (exit 3) unless `text` is a SLSA provenance v1 statement
// one of whose subjects is `image` by its sha256 digest: what the
// `provenance` command checks before it shows one.
void check_statement_of(const std::string& text, const Digest& image);

}  // namespace sb::provenance

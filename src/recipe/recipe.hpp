// The Recipe: what a user declared, as plain values, every node with the
// place in the YAML it came from. recipe/ is the only stage that sees YAML.
//
// This is the first part of the recipe language of DESIGN.md: layers made of
// local files (`copy`), image config, annotations and tags. Matrix, `use:`
// components and build steps grow from here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/error.hpp"

namespace sb {

namespace fs = std::filesystem;

// One `copy:` item: a host path (relative to the recipe's directory) into the image.
struct CopySpec {
  std::string src;
  std::string dst;                       // absolute image path; ending in '/' means "into"
  std::optional<uint32_t> mode;          // forced permission bits for files
  SourceLocation where;
};

struct LayerSpec {
  std::string name;
  std::vector<CopySpec> copy;
  std::optional<uint32_t> uid, gid;      // owner of every entry; default 0:0
  bool preserve_modes = false;           // keep host modes instead of 0644/0755
  std::string comment;
  SourceLocation where;
};

struct ConfigSpec {
  std::vector<std::pair<std::string, std::string>> env;  // in recipe order
  std::vector<std::string> entrypoint, cmd;
  std::string workdir, user, stop_signal;
  std::map<std::string, std::string> labels;
  std::vector<std::string> ports;
};

struct Recipe {
  fs::path file;                          // as given on the command line
  std::string stack;
  std::string architecture = "amd64";     // OCI name: amd64, arm64, ...
  std::optional<int64_t> source_date_epoch;
  std::vector<LayerSpec> layers;
  ConfigSpec config;
  std::map<std::string, std::string> annotations;  // title, version, source, revision, description
  std::vector<std::string> tags;
  SourceLocation tags_where;

  fs::path dir() const { return file.parent_path(); }
};

// Parses and validates a recipe file. Throws sb::InputError at file:line:col.
Recipe load_recipe(const fs::path& file);
Recipe parse_recipe(const std::string& text, const fs::path& file);

void to_json(nlohmann::json& j, const Recipe& r);
void to_json(nlohmann::json& j, const LayerSpec& l);

}  // namespace sb

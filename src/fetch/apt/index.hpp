// The packages the repositories offer: the binary Packages indexes of one
// architecture, parsed in place (fields are views into the index text, which
// the index owns), with lookups by name and by what a package Provides.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fetch/apt/control.hpp"
#include "fetch/apt/sources.hpp"

namespace sb::apt {

struct Package {
  std::string_view name, version, architecture, multi_arch;
  std::string_view depends, pre_depends, recommends, provides, conflicts, breaks;
  std::string_view filename, sha256, priority, section;
  std::string_view paragraph;  // the whole record as in the index
  uint64_t size = 0;
  bool essential = false;
  int repo = 0;                // index into PackageIndex::repositories()

  std::string id() const { return std::string(name) + "=" + std::string(version); }
};

// A provided name: the provider and the version it provides ("" = unversioned).
struct Provider {
  const Package* package;
  std::string version;
};

class PackageIndex {
 public:
  explicit PackageIndex(std::string architecture) : arch_(std::move(architecture)) {}
  PackageIndex(const PackageIndex&) = delete;
  PackageIndex& operator=(const PackageIndex&) = delete;

  // Adds one repository's Packages text; packages of other architectures
  // (neither the index's nor "all") are left out. Returns the repo number.
  int add_repository(const Repository& repo);
  void add_packages(int repo, std::string text);
  void finish();  // builds the lookups; call once after adding everything

  const std::string& architecture() const { return arch_; }
  const std::vector<Repository>& repositories() const { return repos_; }
  size_t size() const { return packages_.size(); }

  // Every version of `name`, best candidate first: higher repository
  // priority, then the newer version.
  const std::vector<const Package*>& versions(std::string_view name) const;
  const std::vector<Provider>& providers(std::string_view name) const;
  // The candidate apt would choose for `name`, or null.
  const Package* candidate(std::string_view name) const;
  std::vector<const Package*> essential() const;  // candidates with Essential: yes, by name
  std::vector<const Package*> by_priority(std::string_view priority) const;

 private:
  std::string arch_;
  std::vector<Repository> repos_;
  std::vector<std::unique_ptr<std::string>> texts_;
  std::vector<Package> packages_;
  std::unordered_map<std::string_view, std::vector<const Package*>> by_name_;
  std::unordered_map<std::string, std::vector<Provider>> providers_;
  std::vector<std::string> provided_names_;
};

// Reads the fields of one record into `p` (views into `record`).
void parse_package(std::string_view record, Package& p);

}  // namespace sb::apt

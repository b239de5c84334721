// deb822 control data: paragraphs of "Field: value" lines with continuation
// lines, as in Packages indexes, Release files, dpkg's status and .sources.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fetch/apt/version.hpp"

namespace sb::apt {

// One paragraph, fields in the order written. Field names compare without case.
struct Paragraph {
  std::vector<std::pair<std::string, std::string>> fields;
  // The value (continuation lines joined with '\n', leading space kept as in
  // the file), or "" when absent.
  const std::string& get(std::string_view name) const;
  bool has(std::string_view name) const;
  void set(const std::string& name, const std::string& value);  // replaces or appends
  std::string str() const;  // the paragraph as text, ending in '\n'
};

// Parses paragraphs separated by blank lines; '#' comment lines are skipped
// when `comments` (deb822 .sources files allow them; Packages files do not).
std::vector<Paragraph> parse_paragraphs(std::string_view text, bool comments = false);

// Calls `fn` for each paragraph without building the whole vector (Packages
// indexes are large). `fn` gets a view valid only during the call.
void for_each_paragraph(std::string_view text, const std::function<void(const Paragraph&)>& fn);

// One alternative of a dependency: "libc6 (>= 2.36)", "python3:any".
struct Atom {
  std::string name;
  std::string arch;  // after ':' ("any", "native", an architecture) or ""
  Relation op = Relation::Any;
  std::string version;
  std::string str() const;
};
// An OR group: "a | b (>= 1)".
using Alternatives = std::vector<Atom>;

// Parses a Depends-style field: comma-separated groups of '|' alternatives.
// Architecture restrictions ("[amd64]") and build profiles ("<!nocheck>") are
// dropped unless they exclude `arch`. Throws sb::Error on a malformed field.
std::vector<Alternatives> parse_depends(std::string_view field, std::string_view arch = "");

std::vector<std::string> split_words(std::string_view s);  // on any whitespace

}  // namespace sb::apt

// Where packages come from: apt repositories as the one-line `.list` format
// ("deb [signed-by=/k.gpg trusted=yes] URI SUITE COMPONENT...") and the deb822
// `.sources` format describe them, read from a machine's /etc/apt (under a
// root directory, so tests use a fake tree) or given by a recipe or setting.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sb::apt {

namespace fs = std::filesystem;

struct Repository {
  std::string uri;                      // "http://host/debian", "file:///srv/repo", a snapshot URL
  std::string suite;                    // "trixie", "trixie-updates"; "./" style flat repos are not supported
  std::vector<std::string> components;  // "main", "contrib"
  fs::path signed_by;                   // keyring for gpgv; empty: the distribution's default
  bool trusted = false;                 // accept an unsigned or badly signed repository
  bool check_valid_until = true;        // refuse an expired Release (snapshots say no)
  int priority = 500;                   // pin: a higher priority wins over a newer version
  std::string origin;                   // filled from the Release file when fetched
  std::string where;                    // "file:line" it was read from, for errors
  bool from_sources_file = false;       // read from a .list/.sources file (errors use its spelling)

  std::string id() const;               // "URI SUITE" for messages and keys
};

void to_json(nlohmann::json& j, const Repository& r);
void from_json(const nlohmann::json& j, Repository& r);

// One-line format; `where` names the file for errors. Skips deb-src lines.
std::vector<Repository> parse_sources_list(const std::string& text, const std::string& where);
// deb822 format (Types/URIs/Suites/Components/Signed-By/Trusted/Enabled).
std::vector<Repository> parse_sources_deb822(const std::string& text, const std::string& where);

// Makes every relative signed-by keyring of `repos` absolute, relative to
// the directory of the sources file `file` they were read from (gpgv would
// otherwise look for a bare name in its home directory).
void resolve_keyrings(std::vector<Repository>& repos, const fs::path& file);

// Reads <root>/etc/apt/sources.list and <root>/etc/apt/sources.list.d/*.list
// and *.sources, in file-name order (as apt does). Files with other suffixes
// (".disabled-...") are ignored.
std::vector<Repository> machine_repositories(const fs::path& root = "/");

// The machine's distribution codename (VERSION_CODENAME in <root>/etc/os-release).
std::string machine_codename(const fs::path& root = "/");

// The repositories of `codename` derived from the machine's for its own
// codename: "bookworm" -> codename, "bookworm-updates" -> codename + "-updates",
// ...; repositories of other suites (vendor repositories) are left out. Empty
// when the machine's configuration has none for its codename.
std::vector<Repository> repositories_for(const std::vector<Repository>& machine, const std::string& machine_codename,
                                         const std::string& codename);

}  // namespace sb::apt

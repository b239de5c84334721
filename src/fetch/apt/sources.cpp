#include "fetch/apt/sources.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fetch/apt/control.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/number.hpp"
#include "util/text.hpp"

namespace sb::apt {

std::string Repository::id() const { return uri + " " + suite; }

void to_json(nlohmann::json& j, const Repository& r) {
  j = {{"uri", r.uri},          {"suite", r.suite},       {"components", r.components},
       {"signed_by", r.signed_by.string()}, {"trusted", r.trusted}, {"check_valid_until", r.check_valid_until},
       {"priority", r.priority}};
}

void from_json(const nlohmann::json& j, Repository& r) {
  r.uri = j.value("uri", std::string());  // none in a lockfile: the machine's, found when it builds
  r.suite = j.at("suite").get<std::string>();
  r.components = j.value("components", std::vector<std::string>{});
  r.signed_by = j.value("signed_by", std::string());
  r.trusted = j.value("trusted", false);
  r.check_valid_until = j.value("check_valid_until", true);
  r.priority = j.value("priority", 500);
}

namespace {

bool yes(const std::string& v) { return v == "yes" || v == "true" || v == "1"; }

std::string strip_slash(std::string uri) {
  while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
  return uri;
}

// An option of either format: signed-by, trusted, check-valid-until.
void apply_option(Repository& r, std::string key, const std::string& value) {
  std::transform(key.begin(), key.end(), key.begin(), ::tolower);
  if (key == "signed-by") r.signed_by = value;
  else if (key == "trusted") r.trusted = yes(value);
  else if (key == "check-valid-until") r.check_valid_until = yes(value);
  else if (key == "pin-priority") {
    auto priority = parse_integer<int>(value);
    if (!priority) throw Error(r.where + ": pin-priority '" + value + "' is not a whole number");
    r.priority = *priority;
  }
}

}  // namespace

std::vector<Repository> parse_sources_list(const std::string& text, const std::string& where) {
  std::vector<Repository> out;
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (trim_view(line).empty()) continue;
    Repository base;
    base.where = where + ":" + std::to_string(lineno);
    // Options in brackets: "[ key=value key2=value ]".
    if (auto lb = line.find('['); lb != std::string::npos) {
      auto rb = line.find(']', lb);
      if (rb == std::string::npos) throw Error(base.where + ": unclosed '[' in a sources line");
      for (const auto& opt : split_words(line.substr(lb + 1, rb - lb - 1))) {
        auto eq = opt.find('=');
        if (eq == std::string::npos) throw Error(base.where + ": option '" + opt + "' has no '='");
        apply_option(base, opt.substr(0, eq), opt.substr(eq + 1));
      }
      line.erase(lb, rb - lb + 1);
    }
    auto words = split_words(line);
    if (words.empty())
      throw Error(base.where + ": a sources line with options and nothing else ('deb [OPTIONS] URI SUITE COMPONENT...')");
    if (words[0] == "deb-src") continue;
    if (words[0] != "deb" || words.size() < 3)
      throw Error(base.where + ": not a sources line ('deb URI SUITE COMPONENT...'): " + std::string(trim_view(line)));
    base.from_sources_file = true;
    base.uri = strip_slash(words[1]);
    base.suite = words[2];
    base.components.assign(words.begin() + 3, words.end());
    out.push_back(base);
  }
  return out;
}

std::vector<Repository> parse_sources_deb822(const std::string& text, const std::string& where) {
  std::vector<Repository> out;
  int n = 0;
  for (const auto& p : parse_paragraphs(text, true)) {
    ++n;
    std::string at = where + " (entry " + std::to_string(n) + ")";
    if (p.has("Enabled") && !yes(std::string(trim_view(p.get("Enabled"))))) continue;
    auto types = split_words(p.get("Types"));
    if (std::find(types.begin(), types.end(), "deb") == types.end()) continue;
    auto uris = split_words(p.get("URIs"));
    auto suites = split_words(p.get("Suites"));
    if (uris.empty() || suites.empty()) throw Error(at + ": a deb822 source needs URIs and Suites");
    Repository base;
    base.where = at;
    base.from_sources_file = true;
    base.components = split_words(p.get("Components"));
    for (const auto& [k, v] : p.fields)
      if (k != "URIs" && k != "Suites" && k != "Components" && k != "Types")
        apply_option(base, k, std::string(trim_view(v)));
    if (!base.signed_by.empty() && base.signed_by.string().find("-----BEGIN") != std::string::npos)
      throw Error(at + ": an inline Signed-By key is not supported; give the keyring's path");
    for (const auto& u : uris)
      for (const auto& s : suites) {
        Repository r = base;
        r.uri = strip_slash(u);
        r.suite = s;
        out.push_back(r);
      }
  }
  return out;
}

void resolve_keyrings(std::vector<Repository>& repos, const fs::path& file) {
  for (auto& r : repos)
    if (!r.signed_by.empty() && r.signed_by.is_relative())
      r.signed_by = fs::absolute(file).parent_path() / r.signed_by;
}

std::vector<Repository> machine_repositories(const fs::path& root) {
  std::vector<Repository> out;
  fs::path main = root / "etc/apt/sources.list";
  std::error_code ec;
  if (fs::exists(main, ec)) {
    auto r = parse_sources_list(read_file(main), main.string());
    resolve_keyrings(r, main);
    out.insert(out.end(), r.begin(), r.end());
  }
  fs::path dir = root / "etc/apt/sources.list.d";
  std::vector<fs::path> files;
  if (fs::is_directory(dir, ec))
    for (const auto& de : fs::directory_iterator(dir, ec)) files.push_back(de.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::vector<Repository> r;
    if (f.extension() == ".list") r = parse_sources_list(read_file(f), f.string());
    else if (f.extension() == ".sources") r = parse_sources_deb822(read_file(f), f.string());
    resolve_keyrings(r, f);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

std::string machine_codename(const fs::path& root) {
  std::error_code ec;
  fs::path p = root / "etc/os-release";
  if (!fs::exists(p, ec)) return "";
  std::string text = read_file(p);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("VERSION_CODENAME=", 0) == 0) {
      std::string v = line.substr(17);
      v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
      return v;
    }
  }
  return "";
}

std::vector<Repository> repositories_for(const std::vector<Repository>& machine, const std::string& mine,
                                         const std::string& codename) {
  std::vector<Repository> out;
  if (mine.empty()) return out;
  for (const auto& r : machine) {
    if (r.suite != mine && r.suite.rfind(mine + "-", 0) != 0) continue;
    Repository c = r;
    c.suite = codename + r.suite.substr(mine.size());
    // A keyring named for the machine's release does not sign another's.
    if (c.signed_by.filename().string().find(mine) != std::string::npos) c.signed_by.clear();
    out.push_back(c);
  }
  return out;
}

}  // namespace sb::apt

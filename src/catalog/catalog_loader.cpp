// load_catalog(): layers/*.yaml -> Catalog, validated like a compiler.
//
// Pass 1 reads each file on its own (keys, types, version syntax). Pass 2
// checks what spans files: every `requires:`/`prefers:` names a component
// that exists, and derives the compute-capability bit masks.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>

#include "catalog/catalog.hpp"
#include "util/file.hpp"
#include "util/yaml_reader.hpp"

namespace sb::catalog {

namespace {

// The shared strict reader, plus the catalog's own value kinds.
class YamlReader : public yaml::Reader {
 public:
  using yaml::Reader::Reader;

  Version version(const YAML::Node& node, std::string_view what) const {
    std::string why;
    auto v = Version::parse(string(node, what), &why);
    if (!v) fail(node, why, "versions are dotted numbers with an optional -revision: 12.6.3, 2.23.4-1");
    return *v;
  }

  // A range, or a list of ranges meaning any of them.
  VersionRange range(const YAML::Node& node, std::string_view what) const {
    std::vector<std::string> texts = string_or_strings(node, what);
    std::string why;
    auto r = VersionRange::parse_any_of(texts, &why);
    if (!r) fail(node, why, "ranges look like \"12.6\", \">=12.0,<12.4\", \"12.0 - 12.3\" or a list of them");
    return *r;
  }

  // A compute capability such as "8.0" or "9.0a".
  std::string arch(const YAML::Node& node) const {
    std::string s = string(node, "a compute capability");
    size_t dot = s.find('.');
    bool ok = dot != std::string::npos && dot > 0 && dot + 1 < s.size();
    for (size_t i = 0; ok && i < s.size(); ++i) {
      char c = s[i];
      if (i == dot) continue;
      bool letter_suffix = i + 1 == s.size() && i > dot + 1 && (c == 'a' || c == 'f');
      ok = std::isdigit(static_cast<unsigned char>(c)) || letter_suffix;
    }
    if (!ok) fail(node, "bad compute capability '" + s + "'", "write it as major.minor: 8.0, 9.0a, 12.0");
    return s;
  }
};

// A component named in requires:/prefers:, checked once all files are read.
struct NameUse {
  std::string component;
  SourceLocation where;
};

class FileLoader {
 public:
  FileLoader(std::string file, std::vector<NameUse>& uses) : r_(std::move(file)), uses_(uses) {}

  Component load(const YAML::Node& root, const std::string& stem) {
    r_.check_keys(root, "a component file",
                  {"component", "description", "citations", "anchors", "priority", "arch_support",
                   "minor_compat", "nvidia_require", "versions"},
                  {"component", "versions"});
    Component c;
    c.where = {r_.file(), 0, 0};
    c.name = r_.string(root["component"], "'component'");
    if (c.name != stem)
      r_.fail(root["component"], "component '" + c.name + "' in a file named '" + stem + ".yaml'",
              "name the file after its component: " + c.name + ".yaml");
    if (auto n = root["description"]) c.description = r_.string(n, "'description'");
    if (auto n = root["citations"]) {  // named citations for YAML anchors: &t3 "..."
      r_.expect_map(n, "'citations'");
      for (auto it = n.begin(); it != n.end(); ++it) r_.string_or_strings(it->second, "a citation");
    }
    if (auto n = root["priority"]) c.priority = static_cast<int>(r_.integer(n, "'priority'"));
    if (auto n = root["arch_support"]) {
      r_.expect_list(n, "'arch_support'");
      for (const auto& item : n) c.arch_support.push_back(arch_support(item));
    }
    if (auto n = root["minor_compat"]) {
      r_.expect_list(n, "'minor_compat'");
      for (const auto& item : n) c.minor_compat.push_back(minor_compat(item));
    }
    if (auto n = root["nvidia_require"]) {
      r_.check_keys(n, "'nvidia_require'", {"brands", "cite"}, {"brands"});
      c.require_brands = r_.strings(n["brands"], "'brands'");
      if (auto cite = n["cite"]) c.require_brands_cite = r_.string_or_strings(cite, "'cite'");
    }
    const YAML::Node& versions = root["versions"];
    r_.expect_list(versions, "'versions'");
    for (const auto& item : versions) {
      Record rec = record(item, c.name);
      for (const auto& other : c.records)
        if (other.version.str() == rec.version.str() && other.build == rec.build)
          r_.fail(item, "duplicate record " + rec.label() + " (first at " + other.where.str() + ")",
                  "give each build of a version its own 'build:' name");
      c.records.push_back(std::move(rec));
    }
    std::stable_sort(c.records.begin(), c.records.end(),
                     [](const Record& a, const Record& b) { return a.version > b.version; });
    return c;
  }

 private:
  std::vector<std::string> cite(const YAML::Node& map) {
    if (auto n = map["cite"]) return r_.string_or_strings(n, "'cite'");
    return {};
  }

  ArchSupport arch_support(const YAML::Node& item) {
    r_.check_keys(item, "an arch_support entry", {"arch", "versions", "cite", "notes"},
                  {"arch", "versions"});
    ArchSupport a;
    a.where = r_.at(item);
    r_.expect_list(item["arch"], "'arch'");
    for (const auto& cc : item["arch"]) a.arch.push_back(r_.arch(cc));
    a.versions = r_.range(item["versions"], "'versions'");
    a.cite = cite(item);
    return a;
  }

  MinorCompat minor_compat(const YAML::Node& item) {
    r_.check_keys(item, "a minor_compat entry",
                  {"versions", "driver_min", "driver_below", "notes", "cite"},
                  {"versions", "driver_min"});
    MinorCompat m;
    m.where = r_.at(item);
    m.versions = r_.range(item["versions"], "'versions'");
    m.driver_min = r_.version(item["driver_min"], "'driver_min'").str();
    if (auto n = item["driver_below"]; n && !n.IsNull())
      m.driver_below = r_.version(n, "'driver_below'").str();
    if (auto n = item["notes"]) m.notes = r_.string(n, "'notes'");
    m.cite = cite(item);
    return m;
  }

  Record record(const YAML::Node& item, const std::string& component) {
    r_.check_keys(item, "a version record",
                  {"version", "build", "aliases", "requires", "prefers", "driver_min",
                   "driver_branches", "compute_capability", "sources", "info", "notes", "cite", "explicit"},
                  {"version"});
    Record rec;
    rec.component = component;
    rec.where = r_.at(item);
    rec.version = r_.version(item["version"], "'version'");
    if (auto n = item["build"]) rec.build = r_.string(n, "'build'");
    if (auto n = item["aliases"]) {
      r_.expect_list(n, "'aliases'");
      for (const auto& alias : n) {
        std::string a = r_.string(alias, "an alias");
        if (Version::parse(a))
          r_.fail(alias, "alias '" + a + "' looks like a version",
                  "aliases are names: trixie, noble");
        rec.aliases.push_back(a);
      }
    }
    if (auto n = item["requires"]) {
      r_.expect_map(n, "'requires'");
      for (auto it = n.begin(); it != n.end(); ++it) {
        Requirement req;
        req.component = r_.string(it->first, "a component name");
        req.where = r_.at(it->first);
        req.range = r_.range(it->second, "'requires: " + req.component + "'");
        uses_.push_back({req.component, req.where});
        rec.requirements.push_back(std::move(req));
      }
    }
    if (auto n = item["prefers"]) {
      r_.expect_map(n, "'prefers'");
      for (auto it = n.begin(); it != n.end(); ++it) {
        std::string name = r_.string(it->first, "a component name");
        uses_.push_back({name, r_.at(it->first)});
        rec.prefers[name] = r_.range(it->second, "'prefers: " + name + "'");
      }
    }
    if (auto n = item["driver_min"]; n && !n.IsNull())
      rec.driver_min = r_.version(n, "'driver_min'").str();
    if (auto n = item["driver_branches"]) rec.driver_branches = r_.strings(n, "'driver_branches'");
    if (auto n = item["compute_capability"]) {
      r_.expect_list(n, "'compute_capability'");
      for (const auto& cc : n) rec.compute_capability.push_back(r_.arch(cc));
    }
    if (auto n = item["sources"]) rec.sources = sources(n);
    if (auto n = item["info"]) {
      r_.expect_map(n, "'info'");
      for (auto it = n.begin(); it != n.end(); ++it)
        rec.info[r_.string(it->first, "a key")] = r_.string(it->second, "an info value");
    }
    if (auto n = item["notes"]) rec.notes = r_.string(n, "'notes'");
    if (auto n = item["explicit"]) rec.explicit_only = r_.boolean(n, "'explicit'");
    rec.cite = cite(item);
    return rec;
  }

  Sources sources(const YAML::Node& n) {
    r_.check_keys(n, "'sources'", {"apt", "pip", "redist", "git", "archive", "debian"});
    Sources s;
    if (auto v = n["apt"]) s.apt = r_.strings(v, "'apt'");
    if (auto v = n["pip"]) s.pip = r_.strings(v, "'pip'");
    if (auto v = n["redist"]) {
      r_.check_keys(v, "'redist'", {"product", "manifest_version", "components", "archive"}, {"product"});
      Redist rd;
      rd.product = r_.string(v["product"], "'product'");
      if (auto m = v["manifest_version"]) rd.manifest_version = r_.version(m, "'manifest_version'").str();
      if (auto a = v["archive"]) {
        rd.archive = r_.string(a, "'archive'");
        if (rd.archive.empty() || rd.archive[0] == '/' || rd.archive.find("..") != std::string::npos ||
            rd.archive.find("://") != std::string::npos)
          r_.fail(a, "'archive' is a path below the redist base URL, e.g. "
                     "redist/nccl/v2.21.5/nccl_2.21.5-1+cuda12.4_{arch}.txz, not '" + rd.archive + "'");
      }
      if (rd.manifest_version.empty() == rd.archive.empty())
        r_.fail(v, "'redist' names either a manifest ('manifest_version') or one archive ('archive')");
      if (auto c = v["components"]) rd.components = r_.strings(c, "'components'");
      s.redist = std::move(rd);
    }
    if (auto v = n["git"]) {
      r_.check_keys(v, "'git'", {"url", "ref"}, {"url", "ref"});
      s.git = GitSource{r_.string(v["url"], "'url'"), r_.string(v["ref"], "'ref'")};
    }
    if (auto v = n["archive"]) {
      r_.check_keys(v, "'archive'", {"url", "sha256"}, {"url"});
      ArchiveSource a{r_.string(v["url"], "'url'"), {}};
      if (auto h = v["sha256"]) a.sha256 = r_.string(h, "'sha256'");
      s.archive = std::move(a);
    }
    if (auto v = n["debian"]) {
      r_.check_keys(v, "'debian'", {"name", "suite"}, {"name"});
      DebianSource d{r_.string(v["name"], "'name'"), {}};
      if (d.name.size() < 2 || !std::isalnum(static_cast<unsigned char>(d.name[0])) ||
          d.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+-.") != std::string::npos)
        r_.fail(v["name"], "'name' is a Debian source package name (lowercase letters, digits, '+', '-', '.'), not '" +
                               d.name + "'");
      if (auto su = v["suite"]) {
        d.suite = r_.string(su, "'suite'");
        if (d.suite.empty() || d.suite.find_first_of(" \t/") != std::string::npos)
          r_.fail(su, "'suite' is a suite or codename (trixie), not '" + d.suite + "'");
      }
      s.debian = std::move(d);
    }
    return s;
  }

  YamlReader r_;
  std::vector<NameUse>& uses_;
};

std::string arch_base(const std::string& arch) {  // "9.0a" -> "9.0"
  std::string base = arch;
  while (!base.empty() && std::isalpha(static_cast<unsigned char>(base.back()))) base.pop_back();
  return base;
}

// Pass 2: names across files, and compute-capability masks.
void link(Catalog& cat, const std::vector<NameUse>& uses) {
  std::vector<std::string> names = cat.component_names();
  for (const auto& use : uses) {
    if (cat.index_of(use.component) >= 0) continue;
    std::string best = suggest(use.component, names);
    std::string message = "unknown component '" + use.component + "'";
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw InputError(use.where, message, "the catalog's components are: " + all);
  }
  auto add_arch = [&](const std::string& a) {
    if (cat.arch_index(a) < 0) cat.arch_names.push_back(a);
  };
  for (auto& c : cat.components) {
    for (const auto& s : c.arch_support)
      for (const auto& a : s.arch) add_arch(a);
    for (const auto& r : c.records)
      for (const auto& a : r.compute_capability) add_arch(a);
  }
  if (cat.arch_names.size() > 64)
    throw Error("the catalog names more than 64 compute capabilities");
  for (auto& c : cat.components) {
    for (auto& r : c.records) {
      for (auto& req : r.requirements) req.target = cat.index_of(req.component);
      uint64_t mask = 0;
      if (!c.arch_support.empty()) {  // what this release can compile for
        for (const auto& s : c.arch_support)
          if (s.versions.contains(r.version))
            for (const auto& a : s.arch) mask |= uint64_t{1} << cat.arch_index(a);
        r.arch_mask = mask;
      } else if (!r.compute_capability.empty()) {  // what it runs on; 9.0 covers 9.0a
        for (size_t i = 0; i < cat.arch_names.size(); ++i)
          for (const auto& cc : r.compute_capability)
            if (arch_base(cat.arch_names[i]) == cc) mask |= uint64_t{1} << i;
        r.arch_mask = mask;
      }
    }
  }
}

}  // namespace

namespace {

Catalog read_catalog(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& files) {
  Catalog cat;
  cat.dir = dir;
  std::vector<NameUse> uses;
  for (const auto& path : files) {
    std::string file = (dir / path.filename()).string();
    YAML::Node root;
    root = yaml::Reader(file).parse(read_file(path));
    try {
      cat.components.push_back(FileLoader(file, uses).load(root, path.stem().string()));
    } catch (const YAML::Exception& e) {  // e.g. a bad conversion we did not foresee
      throw InputError({file, e.mark.line + 1, e.mark.column + 1}, e.msg);
    }
  }
  std::sort(cat.components.begin(), cat.components.end(),
            [](const Component& a, const Component& b) { return a.name < b.name; });
  link(cat, uses);
  return cat;
}

}  // namespace

Catalog load_catalog(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("catalog directory " + dir.string() + " not found");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".yaml")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  // A build reads the catalog for every layer of every point; the YAML is
  // parsed once per process while no file of it changes (name, inode, size
  // and modification time, to the nanosecond).
  std::string stamp = fs::absolute(dir, ec).string();
  for (const auto& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) throw_errno("stat " + f.string());
    stamp += "\n" + f.filename().string() + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
             std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  static std::mutex mu;
  static std::map<std::string, Catalog> read;
  {
    std::lock_guard<std::mutex> g(mu);
    if (auto it = read.find(stamp); it != read.end()) return it->second;
  }
  Catalog cat = read_catalog(dir, files);
  std::lock_guard<std::mutex> g(mu);
  read.emplace(stamp, cat);
  return cat;
}

}  // namespace sb::catalog

#include "pipeline/cluster_ci.hpp"

#include <map>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/mustache.hpp"

namespace sb {

namespace ci {
const std::map<std::string, std::string>& builtin_templates();  // generated from templates/ci/ by CMakeLists.txt
}

namespace {

using json = nlohmann::json;

// What may go into the generated YAML and shell unquoted: no space, quote,
// '$', '`', '\', '#', '*', '&', '|', '<', '>', '(', ')', '{', '}', ';' or newline.
bool plain(const std::string& s, bool allow_semicolon = false) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string("._+,:@/=-").find(static_cast<char>(c)) != std::string::npos || (allow_semicolon && c == ';');
    if (!ok) return false;
  }
  return s.front() != '-' || allow_semicolon;
}

void require_plain(const std::string& what, const std::string& s, bool allow_semicolon = false) {
  if (!plain(s, allow_semicolon))
    throw Error(what + " '" + s + "' cannot be written into a CI file safely: use only letters, digits and " +
                    std::string(allow_semicolon ? "._+,;:@/=-" : "._+,:@/=-") + " (not starting with '-')",
                ErrorKind::Input);
}

// Kubernetes object names: lower case, digits and '-', at most 63 characters
// with room for "-points".
std::string k8s_name(const std::string& stack) {
  std::string out = "stackbuild-";
  for (char c : stack) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9')) ? l : '-';
  }
  while (out.size() > 1 && out.back() == '-') out.pop_back();
  return out.substr(0, 63 - std::string("-release").size());
}

struct EngineFiles {
  std::vector<std::pair<std::string, std::string>> files;  // template -> output name ({stack} replaced)
};

const std::map<std::string, EngineFiles>& engines() {
  static const std::map<std::string, EngineFiles> e{
      {"github", {{{"github-workflow.yml.mustache", "stackbuild-{stack}.yml"}}}},
      {"gitlab", {{{"gitlab-ci.yml.mustache", ".gitlab-ci.yml"}}}},
      {"k8s", {{{"k8s-points.yaml.mustache", "k8s-points.yaml"}, {"k8s-release.yaml.mustache", "k8s-release.yaml"}}}},
  };
  return e;
}

}  // namespace

const std::vector<std::string>& ci_engines() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, files] : engines()) n.push_back(name);
    return n;
  }();
  return names;
}

std::vector<ClusterPoint> cluster_points(const Release& release) {
  std::vector<ClusterPoint> out;
  for (const auto& rp : release.points) {
    ClusterPoint c;
    c.index = out.size();
    c.id = rp.point.id;
    c.tag = rp.tag;
    for (const auto& kv : rp.only) {
      const auto eq = kv.find('=');
      require_plain("matrix key", kv.substr(0, eq));
      require_plain("the value of " + kv.substr(0, eq) + " at point " + c.id, kv.substr(eq + 1), true);
      c.only.push_back(kv);
    }
    out.push_back(std::move(c));
  }
  return out;
}

json cluster_data(const std::string& stack, const std::vector<ClusterPoint>& points, const ClusterOptions& o) {
  require_plain("the recipe path", o.recipe);
  require_plain("the recipe's stack", stack);
  if (!o.recipe.empty() && o.recipe.front() == '/')
    throw Error("the recipe path '" + o.recipe + "' is absolute: the tasks run in their own checkout; give it "
                "relative to the repository's root, and run 'stackbuild cluster' from there",
                ErrorKind::Usage);
  require_plain("--registry", o.registry);
  if (o.cache) require_plain("--cache", *o.cache);
  require_plain("--stackbuild", o.stackbuild);
  if (!o.image.empty()) require_plain("--image", o.image);
  require_plain("--runner", o.runner);
  require_plain("--workdir", o.workdir);
  for (const auto& s : o.sets) require_plain("--set", s, true);

  std::string common = o.recipe + " --locked";
  for (const auto& s : o.sets) common += " --set " + s;
  // As `cluster slurm`'s tasks: no one-point index over the release's tag; the
  // inputs record last, which merge --locked reads to know the point complete.
  std::string build = o.stackbuild + " build " + common + " --no-index --record-inputs" + (o.sbom ? " --sbom" : "") +
                      " --push-to " + o.registry;
  if (o.cache) build += " --cache-from " + *o.cache + " --cache-to " + *o.cache;
  std::string merge = o.stackbuild + " merge " + common + (o.sbom ? " --sbom" : "") + " --registry " + o.registry +
                      " -o release-notes.md";

  json pts = json::array();
  for (const auto& p : points) {
    std::string only;
    for (const auto& kv : p.only) only += (only.empty() ? "" : " ") + kv;
    pts.push_back({{"index", std::to_string(p.index)}, {"id", p.id}, {"only", only}, {"tag", p.tag}});
  }
  return json{{"recipe", o.recipe},
              {"stack", stack},
              {"name", k8s_name(stack)},
              {"registry", o.registry},
              {"cache", o.cache ? json(*o.cache) : json(nullptr)},
              {"image", o.image},
              {"runner", o.runner},
              {"workdir", o.workdir},
              {"timeout_minutes", std::to_string(o.timeout_minutes)},
              {"timeout_seconds", std::to_string(o.timeout_minutes * 60)},
              {"count", std::to_string(points.size())},
              {"points", pts},
              {"build_command", build},
              {"merge_command", merge}};
}

std::vector<GeneratedFile> generate_ci(const std::string& engine, const json& data,
                                       const std::optional<std::filesystem::path>& templates) {
  auto e = engines().find(engine);
  if (e == engines().end()) {
    std::string all;
    for (const auto& n : ci_engines()) all += (all.empty() ? "" : ", ") + n;
    throw Error("cluster: no engine '" + engine + "' (engines: " + all + ", slurm)", ErrorKind::Usage);
  }
  std::vector<GeneratedFile> out;
  for (const auto& [tmpl_name, out_name] : e->second.files) {
    std::string tmpl;
    std::string where = "templates/ci/" + tmpl_name;
    if (templates) {
      where = (*templates / tmpl_name).string();
      tmpl = read_file(*templates / tmpl_name);
    } else {
      tmpl = ci::builtin_templates().at(tmpl_name);
    }
    std::string name = out_name;
    if (auto at = name.find("{stack}"); at != std::string::npos) name.replace(at, 7, data.at("stack").get<std::string>());
    // Every value was checked plain; nothing needs escaping in YAML or shell.
    std::string text = render_mustache(tmpl, data, where, [](const std::string& s) { return s; });
    if (!text.empty() && text.back() != '\n') text += '\n';
    out.push_back({name, std::move(text)});
  }
  return out;
}

}  // namespace sb

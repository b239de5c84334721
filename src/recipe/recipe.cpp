#include "recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include "recipe/yaml_reader.hpp"
#include "util/file.hpp"

namespace sb {

namespace {

using yaml::Reader;

CopySpec parse_copy(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "a copy item", {"src", "dst", "mode"}, {"src", "dst"});
  CopySpec c;
  c.where = r.where(n);
  c.src = r.str(n["src"], "copy.src");
  c.dst = r.str(n["dst"], "copy.dst");
  if (c.src.empty()) r.fail(n["src"], "copy.src is empty");
  if (c.dst.empty() || c.dst[0] != '/')
    r.fail(n["dst"], "copy.dst must be an absolute path in the image, not '" + c.dst + "'");
  if (("/" + c.dst + "/").find("/../") != std::string::npos) r.fail(n["dst"], "copy.dst must not contain '..'");
  if (n["mode"]) c.mode = r.octal_mode(n["mode"], "copy.mode");
  return c;
}

LayerSpec parse_layer(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "a layer", {"name", "copy", "owner", "preserve_modes", "comment"}, {"name"});
  LayerSpec l;
  l.where = r.where(n);
  l.name = r.str(n["name"], "layer name");
  if (l.name.empty() || l.name.find_first_of("/ \t") != std::string::npos)
    r.fail(n["name"], "layer name '" + l.name + "' must be a non-empty word");
  if (n["copy"])
    for (const auto& item : r.seq(n["copy"], "copy")) l.copy.push_back(parse_copy(r, item));
  if (n["owner"]) {
    std::string owner = r.str(n["owner"], "owner");
    auto colon = owner.find(':');
    try {
      size_t used = 0;
      std::string u = owner.substr(0, colon);
      l.uid = static_cast<uint32_t>(std::stoul(u, &used));
      if (used != u.size()) throw std::invalid_argument(u);
      std::string g = colon == std::string::npos ? u : owner.substr(colon + 1);
      l.gid = static_cast<uint32_t>(std::stoul(g, &used));
      if (used != g.size()) throw std::invalid_argument(g);
    } catch (const std::exception&) {
      r.fail(n["owner"], "owner must be numeric 'UID:GID', not '" + owner + "'");
    }
  }
  if (n["preserve_modes"]) l.preserve_modes = r.boolean(n["preserve_modes"], "preserve_modes");
  if (n["comment"]) l.comment = r.str(n["comment"], "comment");
  if (l.copy.empty()) r.fail(n, "layer '" + l.name + "' has nothing in it", "add a 'copy:' list");
  return l;
}

ConfigSpec parse_config(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "config", {"env", "entrypoint", "cmd", "workdir", "user", "labels", "ports", "stop_signal"});
  ConfigSpec c;
  if (const auto& env = n["env"]) {
    if (!env.IsMap()) r.fail(env, "config.env must be a mapping of NAME: value");
    for (const auto& kv : env) {
      std::string k = r.str(kv.first, "an env name");
      if (k.empty() || k.find('=') != std::string::npos) r.fail(kv.first, "bad environment variable name '" + k + "'");
      c.env.emplace_back(k, r.str(kv.second, "config.env." + k));
    }
  }
  if (n["entrypoint"]) c.entrypoint = r.str_list(n["entrypoint"], "config.entrypoint");
  if (n["cmd"]) c.cmd = r.str_list(n["cmd"], "config.cmd");
  if (n["workdir"]) c.workdir = r.str(n["workdir"], "config.workdir");
  if (n["user"]) c.user = r.str(n["user"], "config.user");
  if (n["labels"]) c.labels = r.str_map(n["labels"], "config.labels");
  if (n["ports"]) c.ports = r.str_list(n["ports"], "config.ports");
  if (n["stop_signal"]) c.stop_signal = r.str(n["stop_signal"], "config.stop_signal");
  return c;
}

}  // namespace

Recipe parse_recipe(const std::string& text, const fs::path& file) {
  Reader r(file.string());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(SourceLocation{file.string(), e.mark.line + 1, e.mark.column + 1}, e.msg);
  }
  if (!root.IsMap()) throw InputError(SourceLocation{file.string(), 1, 1}, "a recipe must be a YAML mapping");
  r.expect_map(root, "the recipe",
               {"stack", "architecture", "source_date_epoch", "layers", "config", "annotations", "tags"},
               {"stack", "layers"});
  Recipe rec;
  rec.file = file;
  rec.stack = r.str(root["stack"], "stack");
  if (rec.stack.empty()) r.fail(root["stack"], "stack must not be empty");
  if (root["architecture"]) rec.architecture = r.str(root["architecture"], "architecture");
  if (root["source_date_epoch"]) {
    int64_t e = r.integer(root["source_date_epoch"], "source_date_epoch");
    if (e < 0) r.fail(root["source_date_epoch"], "source_date_epoch must not be negative");
    rec.source_date_epoch = e;
  }
  for (const auto& item : r.seq(root["layers"], "layers")) {
    LayerSpec l = parse_layer(r, item);
    for (const auto& other : rec.layers)
      if (other.name == l.name)
        r.fail(item["name"], "layer name '" + l.name + "' is used twice", "first at " + other.where.str());
    rec.layers.push_back(std::move(l));
  }
  if (rec.layers.empty()) r.fail(root["layers"], "the recipe has no layers");
  if (root["config"]) rec.config = parse_config(r, root["config"]);
  if (const auto& a = root["annotations"]) {
    r.expect_map(a, "annotations", {"title", "version", "source", "revision", "description"});
    rec.annotations = r.str_map(a, "annotations");
  }
  if (root["tags"]) {
    rec.tags = r.str_list(root["tags"], "tags");
    rec.tags_where = r.where(root["tags"]);
  }
  if (rec.tags.empty()) rec.tags.push_back(rec.stack + ":latest");
  return rec;
}

Recipe load_recipe(const fs::path& file) {
  std::string text;
  try {
    text = read_file(file);
  } catch (Error& e) {
    throw Error(e.what(), kExitInput);
  }
  return parse_recipe(text, file);
}

void to_json(nlohmann::json& j, const LayerSpec& l) {
  nlohmann::json copies = nlohmann::json::array();
  for (const auto& c : l.copy) {
    nlohmann::json cj{{"src", c.src}, {"dst", c.dst}};
    if (c.mode) cj["mode"] = *c.mode;
    copies.push_back(cj);
  }
  j = nlohmann::json{{"name", l.name}, {"copy", copies}, {"preserve_modes", l.preserve_modes}};
  if (l.uid) j["uid"] = *l.uid;
  if (l.gid) j["gid"] = *l.gid;
  if (!l.comment.empty()) j["comment"] = l.comment;
}

void to_json(nlohmann::json& j, const Recipe& r) {
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : r.config.env) env.push_back(k + "=" + v);
  j = nlohmann::json{{"stack", r.stack},
                     {"architecture", r.architecture},
                     {"layers", r.layers},
                     {"config",
                      {{"env", env},
                       {"entrypoint", r.config.entrypoint},
                       {"cmd", r.config.cmd},
                       {"workdir", r.config.workdir},
                       {"user", r.config.user},
                       {"labels", r.config.labels},
                       {"ports", r.config.ports}}},
                     {"annotations", r.annotations},
                     {"tags", r.tags}};
  if (r.source_date_epoch) j["source_date_epoch"] = *r.source_date_epoch;
}

}  // namespace sb

// Release notes: the images of a layout gathered into one JSON value, and a
// Mustache template rendered with it (kainjow's mustache, from Debian).
#include "image/notes.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "image/image.hpp"
#include "image/layout.hpp"
#include "image/sbom.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/mustache.hpp"
#include "util/status.hpp"
#include "util/version.hpp"

namespace sb::notes {

using json = nlohmann::json;

const std::string& builtin_template();  // generated from templates/ by CMakeLists.txt

namespace {

constexpr const char* kRefName = "org.opencontainers.image.ref.name";
constexpr const char* kVersionLabel = "dev.stackbuild.version.";
constexpr const char* kCreated = "org.opencontainers.image.created";

// How a component is named on the page; others as their catalog name.
std::string display_name(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"os", "OS"},           {"python", "Python"},    {"cuda", "CUDA"},
      {"cublas", "cuBLAS"},   {"cudnn", "cuDNN"},      {"nccl", "NCCL"},
      {"pytorch", "PyTorch"}, {"jax", "JAX"},          {"tensorflow", "TensorFlow"},
      {"triton", "Triton"},   {"tensorrt", "TensorRT"}};
  auto it = names.find(key);
  return it == names.end() ? key : it->second;
}

// Components in the order of the page: the stack from the bottom up, then the rest by name.
std::vector<std::string> in_stack_order(const std::set<std::string>& keys) {
  static const std::vector<std::string> order = {"os",    "python",     "cuda",     "cublas",
                                                 "cudnn", "nccl",       "tensorrt", "pytorch",
                                                 "jax",   "tensorflow", "triton"};
  auto rank = [&](const std::string& k) {
    return std::find(order.begin(), order.end(), k) - order.begin();
  };
  std::vector<std::string> out(keys.begin(), keys.end());
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return out;
}

std::set<std::string> keys_of(const std::map<std::string, std::string>& m) {
  std::set<std::string> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

std::string joined(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

const json& object_at(const json& j, const char* key) {
  static const json empty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

sbom::Contents contents_of(const Image& f, const Store& store) {
  try {
    if (f.layers.empty() && !f.sbom.empty()) return sbom::contents_from_document(f.sbom);
    sbom::ImageInfo info = sbom::image_info(f.refs.front(), f.digest, f.config.dump());
    return sbom::image_contents(store, info, f.layers);
  } catch (Error& e) {
    e.add_trace("while reading the packages of " + f.refs.front());
    throw;
  }
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t p = 0; p < s.size();) {
    size_t e = s.find(sep, p);
    if (e == std::string::npos) e = s.size();
    if (e > p) out.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

// How an image is named on the page: its first tag as the build wrote it
// ("pytorch:26.11-2.7.0-cuda12.6", from the matrix index), else its ref name.
std::string name_of(const Image& f) {
  auto tags = split_list(string_at(f.point, "dev.stackbuild.tags"), ',');
  return tags.empty() ? f.refs.front() : tags.front();
}

std::map<std::string, std::string> components_of(const Image& f) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : object_at(object_at(f.config, "config"), "Labels").items())
    if (k.starts_with(kVersionLabel) && v.is_string())
      out[k.substr(std::string(kVersionLabel).size())] = v;
  return out;
}

// The same, as the page shows them: the OS by name as well ("Debian 12", the
// first word of its os-release PRETTY_NAME, where the label holds only the
// version).
std::map<std::string, std::string> shown_components(const Image& f,
                                                    const sbom::Contents& contents) {
  auto comps = components_of(f);
  auto os = comps.find("os");
  std::string name = contents.os_name.substr(0, contents.os_name.find(' '));
  if (os != comps.end() && !name.empty() && !os->second.starts_with(name))
    os->second = name + " " + os->second;
  return comps;
}

// The counterpart of `f` (one of `now`) among `old`: the same ref name, else
// the same matrix point, else the one image of the same CUDA X.Y when `f` is
// the one of `now` too (so one old image is never the counterpart of two).
const Image* counterpart(const Image& f, const std::vector<Image>& old,
                         const std::vector<Image>& now) {
  for (const auto& o : old)
    for (const auto& r : f.refs)
      if (std::find(o.refs.begin(), o.refs.end(), r) != o.refs.end()) return &o;
  std::string point = string_at(f.point, "dev.stackbuild.point");
  if (!point.empty())
    for (const auto& o : old)
      if (string_at(o.point, "dev.stackbuild.point") == point) return &o;
  // CUDA X.Y: a monthly release moves to the next update of the same CUDA.
  auto cuda_minor = [](const Image& i) {
    auto comps = components_of(i);
    auto it = comps.find("cuda");
    if (it == comps.end()) return std::string();
    const std::string& v = it->second;
    return v.substr(0, v.find('.', v.find('.') + 1));
  };
  std::string minor = cuda_minor(f);
  if (minor.empty()) return nullptr;
  auto same = [&](const Image& i) { return cuda_minor(i) == minor; };
  if (std::count_if(now.begin(), now.end(), same) != 1) return nullptr;
  if (std::count_if(old.begin(), old.end(), same) != 1) return nullptr;
  return &*std::find_if(old.begin(), old.end(), same);
}

json image_data(const Image& f, const sbom::Contents& contents) {
  json img;
  img["ref"] = f.refs.front();
  img["name"] = name_of(f);
  std::vector<std::string> tags;
  for (const auto& t : split_list(string_at(f.point, "dev.stackbuild.tags"), ','))
    tags.push_back(t);
  img["tags"] = tags;
  img["refs"] = f.refs;
  img["other_refs"] = std::vector<std::string>(f.refs.begin() + 1, f.refs.end());
  img["digest"] = f.digest.str();
  img["short_digest"] = f.digest.hex().substr(0, 12);
  std::string platform = string_at(f.config, "os") + "/" + string_at(f.config, "architecture");
  if (!string_at(f.config, "variant").empty()) platform += "/" + string_at(f.config, "variant");
  img["platform"] = platform;
  img["created"] = string_at(f.config, "created");
  const json& ann = object_at(f.manifest, "annotations");
  img["title"] = string_at(ann, "org.opencontainers.image.title");
  img["description"] = string_at(ann, "org.opencontainers.image.description");
  img["version"] = string_at(ann, "org.opencontainers.image.version");
  img["source"] = string_at(ann, "org.opencontainers.image.source");
  img["revision"] = string_at(ann, "org.opencontainers.image.revision");

  auto comps = shown_components(f, contents);
  json components = json::array();
  for (const auto& k : in_stack_order(keys_of(comps)))
    components.push_back({{"key", k}, {"name", display_name(k)}, {"version", comps[k]}});
  img["components"] = components;
  img["any_components"] = !components.empty();

  const json& cfg = object_at(f.config, "config");
  const json& labels = object_at(cfg, "Labels");
  img["driver_min"] = string_at(labels, "dev.stackbuild.driver_min");
  std::string arch = string_at(labels, "dev.stackbuild.arch");
  std::replace(arch.begin(), arch.end(), ',', ' ');
  std::vector<std::string> archs;
  for (size_t p = 0; p < arch.size();) {
    size_t e = arch.find(' ', p);
    if (e == std::string::npos) e = arch.size();
    if (e > p) archs.push_back(arch.substr(p, e - p));
    p = e + 1;
  }
  img["arch"] = joined(archs);
  img["arch_list"] = archs;
  for (const auto& e : cfg.value("Env", json::array()))
    if (e.is_string() && e.get<std::string>().starts_with("NVIDIA_REQUIRE_CUDA=")) {
      std::string req = e.get<std::string>().substr(20);
      img["require_cuda"] = req;
      // "brand=tesla,driver>=535,driver<536": the older branches a data-center GPU may run it on.
      std::vector<std::string> branches;
      for (const auto& term : split_list(req, ' ')) {
        auto parts = split_list(term, ',');
        if (parts.size() == 3 && parts[0] == "brand=tesla" && parts[1].starts_with("driver>="))
          branches.push_back("R" + parts[1].substr(8));
      }
      img["datacenter_branches"] = joined(branches);
    }

  uint64_t size = 0;
  for (const auto& l : f.manifest.at("layers")) size += l.value("size", uint64_t{0});
  img["layers"] = f.manifest.at("layers").size();
  img["size_bytes"] = size;
  img["size"] = human_bytes(static_cast<double>(size));  // as the build's summary says it

  img["os"] = contents.os_name;
  std::map<std::string, size_t> counts;
  for (const auto& p : contents.packages) ++counts[p.type];
  json packages = {{"total", contents.packages.size()}};
  std::vector<std::string> said;
  for (const auto& [type, label] :
       std::vector<std::pair<std::string, std::string>>{{"deb", "Debian"},
                                                        {"apk", "Alpine"},
                                                        {"python", "Python"},
                                                        {"cuda", "CUDA"},
                                                        {"source", "source"}}) {
    packages[type] = counts[type];
    if (counts[type]) said.push_back(std::to_string(counts[type]) + " " + label);
  }
  img["packages"] = packages;
  img["package_counts"] = joined(said);

  // The source trees it was compiled from or keeps, from its labels (as its
  // SBOM lists them; the same from a layout and a registry).
  sbom::Contents trees;
  std::map<std::string, std::string> label_map;
  for (const auto& [k, v] : labels.items())
    if (v.is_string()) label_map[k] = v.get<std::string>();
  sbom::add_source_packages(trees, label_map);
  json sources = json::array();
  for (const auto& p : trees.packages) {
    std::string origin =
        p.purl.starts_with("pkg:deb/") ? "Debian's source package " + p.source + " " + p.revision +
                                             (p.sha256.empty() ? "" : " (.dsc sha256:" + p.sha256 + ")")
        : p.download.empty() ? "a local directory"
        : !sbom::git_repository(p).empty()
            ? "git " + sbom::git_repository(p) + (p.revision.empty() ? "" : " at " + p.revision)
            : p.download;
    sources.push_back({{"name", p.name},
                       {"version", p.version},
                       {"origin", origin},
                       {"kept", !p.file.empty()},
                       {"path", p.file},
                       {"compiled", p.built}});
  }
  img["sources"] = sources;

  json tests = json::array();
  std::vector<std::string> gpu, plain;
  json declared = json::parse(string_at(labels, "dev.stackbuild.tests"), nullptr, false);
  if (declared.is_object()) {
    for (const auto& t : declared.value("tests", json::array())) {
      if (!t.is_object() || !t.contains("name")) continue;
      bool on_gpu = t.value("gpu", false);
      tests.push_back({{"name", t.value("name", "")}, {"gpu", on_gpu}});
      (on_gpu ? gpu : plain).push_back(t.value("name", ""));
    }
    std::vector<std::string> builtin;
    for (const auto& b : declared.value("builtin", json::array()))
      if (b.is_string()) builtin.push_back(b.get<std::string>());
    img["builtin_tests"] = joined(builtin);
  }
  img["tests"] = tests;
  // Its test report (`test --add-to-layout`, the build's gate, or attached in a registry).
  const json& rep = f.report;
  if (rep.is_object() && rep.contains("summary") && rep["summary"].is_object()) {
    std::vector<std::string> failed;
    for (const auto& r : rep.value("results", json::array()))
      if (r.is_object() && r.value("outcome", "") == "failed")
        failed.push_back(r.value("name", ""));
    const json& s = rep["summary"];
    img["tested"] = {{"passed", s.value("passed", 0)},   {"failed", s.value("failed", 0)},
                     {"skipped", s.value("skipped", 0)}, {"gpus", rep.value("gpus", "")},
                     {"failed_tests", joined(failed)},   {"report", f.report_digest}};
  }
  img["gpu_tests"] = joined(gpu);
  img["cpu_tests"] = joined(plain);
  std::string text = joined(plain);
  if (!gpu.empty()) text += (text.empty() ? "" : "; ") + std::string("on a GPU: ") + joined(gpu);
  if (!img.value("builtin_tests", "").empty())
    text += (text.empty() ? "" : "; ") + std::string("built-in: ") + img.value("builtin_tests", "");
  img["tests_text"] = text;
  return img;
}

// What changed from `old` to `f`: its components (the labels) and packages.
json compared_data(const Image& f, const sbom::Contents& contents, const Image& old,
                   const Store& store) {
  const Digest& was_digest = old.digest;
  json compared = {{"ref", old.refs.front()},
                   {"name", name_of(old)},
                   {"digest", was_digest.str()},
                   {"short_digest", was_digest.hex().substr(0, 12)},
                   {"same", was_digest == f.digest}};
  sbom::Contents old_contents = contents_of(old, store);
  auto now = shown_components(f, contents), was = shown_components(old, old_contents);
  std::set<std::string> keys = keys_of(now);
  keys.merge(keys_of(was));
  json changes = json::array();
  for (const auto& k : in_stack_order(keys))
    if (was[k] != now[k])
      changes.push_back(
          {{"name", display_name(k)}, {"before", or_dash(was[k])}, {"after", or_dash(now[k])}});
  compared["component_changes"] = changes;
  compared["any_component_changes"] = !changes.empty();
  sbom::PackageChanges pc = sbom::package_changes(old_contents, contents);
  json rows = json::array();
  for (const auto& r : pc.rows)
    rows.push_back({{"name", r.name},
                    {"kind", r.kind},
                    {"before", or_dash(r.before)},
                    {"after", or_dash(r.after)}});
  compared["packages"] = {{"changed", pc.changed}, {"added", pc.added},
                          {"removed", pc.removed}, {"unchanged", pc.unchanged},
                          {"rows", rows},          {"any_rows", !rows.empty()}};
  return compared;
}

}  // namespace

void offer_report(Image& f, std::string& newest, const std::string& text, const Digest& manifest,
                  const std::string& created) {
  json rep = json::parse(text, nullptr, false);
  if (!rep.is_object() || !rep.contains("summary")) return;  // not a report stackbuild wrote
  if (!f.report.is_null() && created < newest) return;
  f.report = std::move(rep);
  f.report_digest = manifest.str();
  newest = created;
}

json image_config(const std::string& bytes, const std::string& name) {
  json config = parse_config_document(bytes, "the config of " + name);
  image_config_from(config, "the config of " + name);  // throws naming the field
  return config;
}

Images read_layout(const fs::path& layout, const Store* store) {
  fs::path index = layout / "index.json";
  if (!fs::exists(index))
    throw Error(layout.string() + " is not an OCI image layout (no index.json)", ErrorKind::Usage);
  Images out;
  out.where = layout.string();
  std::map<Digest, std::vector<std::string>> refs;
  std::map<Digest, json> points;
  try {
    json j = json::parse(read_file(index));
    for (const auto& m : j.at("manifests")) {
      if (m.contains("artifactType")) continue;  // an SBOM or report of an image
      std::string ref = string_at(object_at(m, "annotations"), kRefName);
      Digest d = Digest::parse(m.at("digest").get<std::string>());
      std::string type = string_at(m, "mediaType");
      if (type.find("index") != std::string::npos ||
          type.find("manifest.list") != std::string::npos) {
        // A matrix index: its images' points, the stack and release.
        json idx = json::parse(read_file(layout / "blobs" / d.algorithm() / d.hex()));
        const json& a = object_at(idx, "annotations");
        if (out.stack.empty()) out.stack = string_at(a, "dev.stackbuild.stack");
        if (out.release.empty()) out.release = string_at(a, "dev.stackbuild.release");
        for (const auto& c : idx.value("manifests", json::array()))
          points[Digest::parse(c.at("digest").get<std::string>())] = object_at(c, "annotations");
        continue;
      }
      if (!ref.empty()) refs[d].push_back(ref);
    }
  } catch (const json::exception& e) {
    throw Error(index.string() + ": " + e.what());
  }
  for (auto& [d, names] : refs) {
    std::sort(names.begin(), names.end());
    LayoutImage li = open_layout_image(layout, names.front(), store);
    Image f{.refs = names,
            .point = points.count(d) ? points[d] : json::object(),
            .digest = li.manifest_digest,
            .manifest = json::parse(li.manifest_json),
            .config = image_config(li.config_json, names.front())};
    const json& ls = f.manifest.at("layers");
    for (size_t i = 0; i < li.layer_blobs.size(); ++i)
      f.layers.emplace_back(Digest::parse(ls.at(i).at("digest").get<std::string>()),
                            li.layer_blobs[i]);
    std::string newest;
    for (const auto& a : layout_referrers(layout, f.digest))
      if (a.artifact_type == kTestReportType) {
        json m = json::parse(a.manifest_json, nullptr, false);
        offer_report(f, newest, read_file(a.file), a.manifest,
                     string_at(object_at(m, "annotations"), kCreated));
      }
    out.images.push_back(std::move(f));
  }
  std::sort(out.images.begin(), out.images.end(),
            [](const Image& a, const Image& b) { return a.refs.front() < b.refs.front(); });
  return out;
}

json notes_data(const Images& now, const Store& store, const std::optional<Images>& before) {
  if (now.images.empty()) throw Error(now.where + " holds no image with a ref name", ErrorKind::Usage);
  json out;
  out["tool"] = std::string("stackbuild ") + kStackbuildVersion;
  out["layout"] = now.where;
  out["stack"] = now.stack;
  out["release"] = now.release;
  if (before) out["since"] = before->where;

  // The components table: every component of any image, in stack order.
  std::set<std::string> all;
  for (const auto& f : now.images) all.merge(keys_of(components_of(f)));
  std::vector<std::string> columns = in_stack_order(all);
  json cols = json::array();
  for (const auto& c : columns) cols.push_back({{"key", c}, {"name", display_name(c)}});
  out["columns"] = cols;

  std::set<const Image*> matched;
  json images = json::array();
  for (const auto& f : now.images) {
    sbom::Contents contents = contents_of(f, store);
    json img = image_data(f, contents);
    auto comps = shown_components(f, contents);
    json cells = json::array();
    for (const auto& c : columns) cells.push_back(or_dash(comps[c]));
    img["cells"] = cells;
    if (before) {
      const Image* old = counterpart(f, before->images, now.images);
      if (!old) {
        img["new"] = true;
      } else {
        matched.insert(old);
        img["compared"] = compared_data(f, contents, *old, store);
      }
    }
    images.push_back(img);
  }
  out["images"] = images;
  out["title"] = images[0].value("title", "");
  out["description"] = images[0].value("description", "");
  if (before) {
    json gone = json::array();
    for (const auto& o : before->images)
      if (!matched.count(&o))
        gone.push_back({{"ref", o.refs.front()}, {"name", name_of(o)}, {"digest", o.digest.str()}});
    out["removed_images"] = gone;
    out["any_removed_images"] = !gone.empty();
  }
  return out;
}

std::string render(const std::string& tmpl, const json& data, const std::string& template_name) {
  return render_mustache(tmpl, data, template_name, [](const std::string& s) { return sbom::markdown_cell(s); });
}

const std::string& default_template() {
  return builtin_template();
}

}  // namespace sb::notes

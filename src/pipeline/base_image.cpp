#include "pipeline/base_image.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "registry/pull.hpp"
#include "registry/push.hpp"
#include "resolve/lockfile.hpp"
#include "util/file.hpp"

namespace sb {

using json = nlohmann::json;

namespace {

constexpr const char* kOciPrefix = "oci:";

// `from: oci:PATH[:TAG][@sha256:...]`: PATH relative to the recipe that wrote it.
struct LayoutRef {
  fs::path dir;
  std::string tag;
  std::optional<Digest> digest;
};

LayoutRef parse_layout_ref(const Recipe& r) {
  std::string s = r.from.value.substr(std::string(kOciPrefix).size());
  LayoutRef out;
  if (auto at = s.rfind('@'); at != std::string::npos) {
    try {
      out.digest = Digest::parse(s.substr(at + 1));
    } catch (const Error& e) {
      throw InputError(r.from.where, "from: '" + r.from.value + "': " + e.what());
    }
    s.resize(at);
  }
  auto slash = s.rfind('/');
  if (auto colon = s.rfind(':'); colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    out.tag = s.substr(colon + 1);
    s.resize(colon);
  }
  if (s.empty()) throw InputError(r.from.where, "from: '" + r.from.value + "' names no layout directory", "write oci:PATH[:TAG]");
  out.dir = fs::path(s).is_absolute() ? fs::path(s) : r.from_dir / s;
  return out;
}

registry::Reference parse_registry_ref(const Recipe& r) {
  try {
    return registry::Reference::parse(r.from.value);
  } catch (const Error& e) {
    throw InputError(r.from.where, "from: " + std::string(e.what()),
                     "write REGISTRY/REPO:TAG, REGISTRY/REPO@sha256:..., or oci:PATH[:TAG] for a local OCI layout");
  }
}

bool is_layout(const Recipe& r) { return r.from.value.rfind(kOciPrefix, 0) == 0; }

std::string oci_layer_type(const std::string& type, const std::string& ref, size_t i) {
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.oci.image.layer.v1.tar+gzip"},
      {"application/vnd.oci.image.layer.v1.tar+zstd", "application/vnd.oci.image.layer.v1.tar+zstd"},
      {"application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar"},
      // Docker v2 layers are the same bytes under another name.
      {"application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.oci.image.layer.v1.tar+gzip"},
      {"application/vnd.docker.image.rootfs.diff.tar", "application/vnd.oci.image.layer.v1.tar"},
  };
  for (const auto& [from, to] : map)
    if (type == from) return to;
  throw Error("base image " + ref + ": layer " + std::to_string(i + 1) + " has media type '" + type +
              "', which stackbuild does not build on (foreign or non-distributable layers)");
}

// The parts of an image config a recipe can override, its diff_ids and history.
void read_config(const std::string& bytes, BaseImage& b, const std::string& arch) {
  const std::string where = "base image " + b.pinned + ": its config";
  json cfg = parse_config_document(bytes, where);
  ImageConfig& c = b.config;
  c = image_config_from(cfg, where);
  if (c.os != "linux" || c.architecture != arch)
    throw Error("base image " + b.pinned + " is for " + c.os + "/" + c.architecture +
                ", and the recipe builds linux/" + arch + " (architecture:)");

  std::vector<Digest> diff_ids = read_diff_ids(cfg, where);
  if (diff_ids.size() != b.layers.size())
    throw Error(where + " lists " + std::to_string(diff_ids.size()) + " diff_ids for " +
                std::to_string(b.layers.size()) + " layers");
  for (size_t i = 0; i < diff_ids.size(); ++i) b.layers[i].diff_id = diff_ids[i];

  size_t real = 0;
  if (cfg.contains("history") && cfg["history"].is_array()) {
    for (const auto& h : cfg["history"]) {
      if (!h.is_object()) continue;
      HistoryEntry e{h.value("created_by", ""), h.value("comment", ""), h.value("empty_layer", false),
                     h.value("created", "")};
      real += e.empty_layer ? 0 : 1;
      b.history.push_back(std::move(e));
    }
  }
  if (real != b.layers.size()) {  // no history, or one that does not match the layers: one entry a layer
    b.history.clear();
    for (size_t i = 0; i < b.layers.size(); ++i)
      b.history.push_back({"base image " + b.ref + ": layer " + std::to_string(i + 1), "", false, ""});
  }
}

// The manifest's config and layer descriptors.
void read_manifest(const std::string& bytes, BaseImage& b, Digest& config) {
  try {
    json m = json::parse(bytes);
    if (!m.contains("layers") || !m.contains("config"))
      throw Error("base image " + b.pinned + ": manifest " + b.manifest.str() + " is not an image manifest");
    config = Digest::parse(m["config"].at("digest").get<std::string>());
    const json& layers = m["layers"];
    for (size_t i = 0; i < layers.size(); ++i) {
      Digest d = Digest::parse(layers[i].at("digest").get<std::string>());
      Layer l{d, d, layers[i].at("size").get<uint64_t>(), 0,
              oci_layer_type(layers[i].value("mediaType", ""), b.pinned, i)};
      l.annotations = chunked_annotations(layers[i]);  // a chunked format's TOC, checked; nothing else
      b.layers.push_back(std::move(l));
    }
  } catch (const json::exception& e) {
    throw Error("base image " + b.pinned + ": a malformed manifest: " + e.what());
  }
}

Digest platform_key(const Digest& top, const std::string& arch) {
  return KeyHasher().field("base-platform", top.str()).field("os", "linux").field("architecture", arch).finish();
}

// The image from the store alone, when `top` (pinned) was pulled before.
std::optional<std::pair<Digest, std::string>> from_store(const Store& store, const Digest& top, const std::string& arch) {
  auto rec = store.get_record("base-manifest", platform_key(top, arch));
  if (!rec) return std::nullopt;
  try {
    Digest m = Digest::parse(json::parse(*rec).at("manifest").get<std::string>());
    if (!store.has(m)) return std::nullopt;
    return std::make_pair(m, store.read(m));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool blobs_in_store(const Store& store, const BaseImage& b, const Digest& config) {
  if (!store.has(config)) return false;
  return std::all_of(b.layers.begin(), b.layers.end(), [&](const Layer& l) { return store.has(l.digest); });
}

// From a registry: by digest (the recipe's, or the lock's) or by tag.
BaseImage pull_base(const Recipe& r, const Store& store, const BaseImageOptions& o, const std::optional<Digest>& locked,
                    Status& status) {
  registry::Reference ref = parse_registry_ref(r);
  if (locked) ref.digest = *locked;
  Digest config = Digest::of_bytes("");
  if (ref.digest) {  // pinned: maybe the store has it all
    if (auto hit = from_store(store, *ref.digest, r.architecture)) {
      BaseImage b(r.from.value, *ref.digest, hit->first, ref.name() + "@" + ref.digest->str());
      read_manifest(hit->second, b, config);
      if (blobs_in_store(store, b, config)) {
        read_config(store.read(config), b, r.architecture);
        return b;
      }
    }
  }
  registry::PullOptions po;
  po.session = o.session;
  po.jobs = o.jobs;
  po.architecture = r.architecture;
  registry::PullResult pulled = registry::pull_image(ref, store, po, status);
  BaseImage b(r.from.value, pulled.index_digest, pulled.image.manifest.digest,
              ref.name() + "@" + pulled.index_digest.str());
  store.put(pulled.image.manifest_json, b.manifest);
  read_manifest(pulled.image.manifest_json, b, config);
  read_config(pulled.image.config_json, b, r.architecture);
  store.put_record("base-manifest", platform_key(b.digest, r.architecture), json{{"manifest", b.manifest.str()}}.dump());
  if (!ref.digest) status.message(Level::Info, "base image " + b.ref + " is " + b.digest.str());
  return b;
}

// The descriptor `ref` names in the layout: by digest, by ref name, or the only one.
registry::LayoutEntry layout_entry(const Recipe& r, const LayoutRef& ref, const std::optional<Digest>& locked) {
  if (!fs::is_directory(ref.dir))
    throw InputError(r.from.where, "from: " + ref.dir.string() + " is not a directory (an OCI image layout)");
  auto entries = registry::layout_entries(ref.dir);
  std::vector<registry::LayoutEntry> match;
  for (const auto& e : entries)
    if (ref.tag.empty() ? entries.size() == 1 || ref.digest : e.ref == ref.tag) match.push_back(e);
  if (ref.digest) std::erase_if(match, [&](const auto& e) { return e.digest != *ref.digest; });
  std::string names;
  for (const auto& e : entries) names += (names.empty() ? "" : ", ") + (e.ref.empty() ? e.digest.str() : e.ref);
  if (match.empty()) {
    std::string what = ref.digest ? "no image " + ref.digest->str() + (ref.tag.empty() ? "" : " named '" + ref.tag + "'")
                       : ref.tag.empty() ? std::to_string(entries.size()) + " images; name one as oci:PATH:TAG"
                                         : "no image named '" + ref.tag + "'";
    throw InputError(r.from.where, "from: the layout " + ref.dir.string() + " has " + what + " (it has: " + names + ")");
  }
  if (locked && match.front().digest != *locked)
    throw Error("--locked: base image " + r.from.value + " is " + match.front().digest.str() + " now, and the lockfile pins " +
                    locked->str() + "\n  review the change, then run 'stackbuild lock " + r.file.string() + "'",
                ErrorKind::Input);
  return match.front();
}

// From a local OCI layout: blobs copied into the store, each digest checked.
BaseImage layout_base(const Recipe& r, const Store& store, const std::optional<Digest>& locked) {
  LayoutRef ref = parse_layout_ref(r);
  registry::LayoutEntry e = layout_entry(r, ref, locked);
  BaseImage b(r.from.value, e.digest, e.digest, "oci:" + ref.dir.string() + "@" + e.digest.str());
  auto put = [&](const Digest& d) {
    fs::path p = ref.dir / "blobs" / "sha256" / d.hex();
    if (store.has(d)) return;
    if (!fs::exists(p)) throw Error("base image " + b.pinned + ": the layout lacks blob " + d.str());
    store.put_file(p, d);  // checks the digest
  };
  auto blob = [&](const Digest& d) {
    put(d);
    return store.read(d);
  };
  std::string top = blob(e.digest);
  std::string manifest = top;
  try {
    json j = json::parse(top);
    if (j.contains("manifests") && !j.contains("layers")) {  // an index: the recipe's platform
      std::string have;
      std::optional<Digest> chosen;
      for (const auto& m : j["manifests"]) {
        json p = m.value("platform", json::object());
        have += (have.empty() ? "" : ", ") + p.value("os", "?") + "/" + p.value("architecture", "?");
        if (!chosen && p.value("os", "") == "linux" && p.value("architecture", "") == r.architecture)
          chosen = Digest::parse(m.at("digest").get<std::string>());
      }
      if (!chosen)
        throw Error("base image " + b.pinned + " has no image for linux/" + r.architecture + " (it has: " + have + ")");
      b.manifest = *chosen;
      manifest = blob(*chosen);
    }
  } catch (const json::exception& ex) {
    throw Error("base image " + b.pinned + ": a malformed manifest: " + ex.what());
  }
  Digest config = Digest::of_bytes("");
  read_manifest(manifest, b, config);
  std::string config_bytes = blob(config);
  for (const auto& l : b.layers) put(l.digest);
  read_config(config_bytes, b, r.architecture);
  return b;
}

std::optional<Digest> locked_digest(const Recipe& r, const std::string& locked) {
  if (locked.empty()) return std::nullopt;
  json j = json::parse(locked);
  if (j.value("from", "") != r.from.value)
    throw Error("--locked: the recipe's base image is " + r.from.value + ", and the lockfile pins " +
                    j.value("from", "(none)") + "\n  review the change, then run 'stackbuild lock " + r.file.string() + "'",
                ErrorKind::Input);
  return Digest::parse(j.at("digest").get<std::string>());
}

}  // namespace

Digest BaseImage::cache_key() const {
  return KeyHasher().field("stackbuild-base", "1").field("manifest", manifest.str()).finish();
}

std::optional<BaseImage> load_base_image(const Recipe& r, const Store& store, const BaseImageOptions& o, Status& status) {
  if (r.from.value.empty()) return std::nullopt;
  try {
    std::optional<Digest> locked = locked_digest(r, o.locked);
    return is_layout(r) ? layout_base(r, store, locked) : pull_base(r, store, o, locked, status);
  } catch (InputError&) {
    throw;
  } catch (Error& e) {
    e.add_trace("while getting the base image " + r.from.value + " (from: at " + r.from.where.str() + ")");
    throw;
  }
}

ImageConfig inherit_config(const ImageConfig& base, const ImageConfig& mine, const Recipe& r) {
  ImageConfig c = base;
  c.architecture = mine.architecture;
  for (const auto& kv : mine.env) {
    std::string name = kv.substr(0, kv.find('='));
    auto it = std::find_if(c.env.begin(), c.env.end(), [&](const std::string& e) { return e.substr(0, e.find('=')) == name; });
    if (it != c.env.end()) *it = kv;
    else c.env.push_back(kv);
  }
  if (!r.config.entrypoint.empty()) {
    c.entrypoint = mine.entrypoint;
    c.cmd.clear();  // as a Dockerfile's ENTRYPOINT does
  }
  if (!r.config.cmd.empty()) c.cmd = mine.cmd;
  if (!mine.working_dir.empty()) c.working_dir = mine.working_dir;
  if (!mine.user.empty()) c.user = mine.user;
  if (!mine.stop_signal.empty()) c.stop_signal = mine.stop_signal;
  for (const auto& [k, v] : mine.labels) c.labels[k] = v;
  for (const auto& p : mine.exposed_ports)
    if (std::find(c.exposed_ports.begin(), c.exposed_ports.end(), p) == c.exposed_ports.end()) c.exposed_ports.push_back(p);
  return c;
}

json lock_base_image(const Recipe& r, const registry::SessionOptions& session, Status& status) {
  if (r.from.value.empty()) return nullptr;
  Digest d = Digest::of_bytes("");
  try {
    if (is_layout(r)) {
      d = layout_entry(r, parse_layout_ref(r), std::nullopt).digest;
    } else {
      registry::Reference ref = parse_registry_ref(r);
      d = ref.digest ? *ref.digest : registry::resolve_digest(ref, session, status);
    }
  } catch (InputError&) {
    throw;
  } catch (Error& e) {
    e.add_trace("while locking the base image " + r.from.value + " (from: at " + r.from.where.str() + ")");
    throw;
  }
  return json{{"from", r.from.value}, {"digest", d.str()}};
}

void add_base_lock_extras(const Planned& planned, std::vector<json>& extras, const registry::SessionOptions& session,
                          Status& status, const std::vector<bool>& which) {
  if (planned.recipe.from.value.empty()) return;
  extras.resize(std::max(extras.size(), planned.plan.points.size()));
  for (size_t i = 0; i < planned.plan.points.size(); ++i) {
    const auto& p = planned.plan.points[i];
    if (!p.stack || (!which.empty() && !which[i])) continue;
    json base = lock_base_image(resolve::instantiate(planned.recipe, p), session, status);
    if (!extras[i].is_object()) extras[i] = json::object();
    extras[i]["base"] = base;
  }
}

std::string locked_base(const Planned& planned, const resolve::PlanPoint& point) {
  if (planned.recipe.from.value.empty()) return "";
  fs::path path = resolve::lock_path(planned.recipe.file);
  json j = resolve::locked_field(read_file(path), point.point, "base");
  if (!j.is_object() || !j.contains("digest") || !j.contains("from"))
    throw Error("--locked: the lockfile " + path.string() + " pins no base image for point " + point.point.id() +
                    " (from: " + planned.recipe.from.value + ")\n  run 'stackbuild lock " + planned.recipe.file.string() +
                    "' to record its digest",
                ErrorKind::Input);
  std::string bad;
  if (!j["from"].is_string())
    bad = "its from is " + j["from"].dump() + ", not a string";
  else if (!j["digest"].is_string())
    bad = "its digest is " + j["digest"].dump() + ", not a string";
  else
    try {
      Digest::parse(j["digest"].get<std::string>());
    } catch (const Error& e) {
      bad = e.what();
    }
  if (!bad.empty())
    throw Error("--locked: the lockfile " + path.string() +
                    " pins a malformed base image for point " + point.point.id() + ": " + bad +
                    "\n  run 'stackbuild lock " + planned.recipe.file.string() +
                    "' to record its digest again",
                ErrorKind::Input);
  return j.dump();
}

}  // namespace sb

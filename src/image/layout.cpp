#include "image/layout.hpp"

#include <sys/utsname.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "archive/extract.hpp"
#include "image/image.hpp"
#include "layer/tar_writer.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb {

using json = nlohmann::json;

std::string layout_ref_name(const std::string& tag) {
  auto slash = tag.rfind('/');
  auto colon = tag.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return "latest";
  return tag.substr(colon + 1);
}

std::vector<std::string> recorded_ref_names(const std::string& tags) {
  std::vector<std::string> out;
  for (size_t p = 0; p < tags.size();) {
    size_t e = std::min(tags.find(',', p), tags.size());
    if (e > p) out.push_back(layout_ref_name(tags.substr(p, e - p)));
    p = e + 1;
  }
  return out;
}

static fs::path checked_blob(const fs::path& layout, const json& desc, const Store* store = nullptr,
                             bool hash = true);
static std::optional<Digest> subject_of(const fs::path& dir, const json& entry, std::string* manifest_json = nullptr);

// Puts a store blob into the layout: a hardlink where the filesystem allows,
// else a checked copy. Skips blobs already present.
static void place_blob(const fs::path& blobs, const Store& store, const Digest& d) {
  fs::path dest = blobs / d.hex();
  if (::access(dest.c_str(), F_OK) == 0) return;
  fs::path src = store.blob_path(d);
  if (::link(src.c_str(), dest.c_str()) == 0) return;
  AtomicFile f(dest, 0644);
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) throw_errno("open " + src.string());
  Sha256 sha;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0) throw_errno("read " + src.string());
    if (n == 0) break;
    sha.update(buf.data(), static_cast<size_t>(n));
    f.write(buf.data(), static_cast<size_t>(n));
  }
  if (sha.finish() != d) throw Error("store blob " + d.str() + " is corrupt; delete " + src.string());
  f.commit();
}

static void place_bytes(const fs::path& blobs, const std::string& bytes, const Digest& d) {
  fs::path dest = blobs / d.hex();
  if (::access(dest.c_str(), F_OK) == 0) return;
  write_file_atomic(dest, bytes);
}

void write_oci_layout(const fs::path& dir, const Store& store, const std::vector<TaggedImage>& images,
                      const std::vector<TaggedIndex>& indexes) {
  fs::path blobs = dir / "blobs" / "sha256";
  try {
    fs::create_directories(blobs);
  } catch (const fs::filesystem_error& e) {
    throw Error("cannot create OCI layout " + dir.string() + ": " + e.code().message());
  }
  FileLock lock(dir / ".stackbuild.lock");

  fs::path layout_file = dir / "oci-layout";
  if (::access(layout_file.c_str(), F_OK) != 0) write_file_atomic(layout_file, R"({"imageLayoutVersion":"1.0.0"})");

  // Keep what the index already lists under other ref names.
  std::vector<Descriptor> manifests;
  std::vector<json> kept;
  fs::path index_file = dir / "index.json";
  std::set<std::string> new_refs;
  for (const auto& ti : images) new_refs.insert(layout_ref_name(ti.tag));
  for (const auto& ix : indexes) new_refs.insert(ix.ref);
  if (::access(index_file.c_str(), F_OK) == 0) {
    json old;
    try {
      old = json::parse(read_file(index_file));
    } catch (const json::exception& e) {
      throw Error(index_file.string() + " is not valid JSON: " + e.what());
    }
    for (const auto& m : old.value("manifests", json::array())) {
      std::string ref = m.value("annotations", json::object()).value("org.opencontainers.image.ref.name", "");
      if (!new_refs.count(ref)) kept.push_back(m);
    }
  }

  for (const auto& ti : images) {
    for (const auto& l : ti.image.layers) place_blob(blobs, store, l.digest);
    place_bytes(blobs, ti.image.config_json, ti.image.config.digest);
    place_bytes(blobs, ti.image.manifest_json, ti.image.manifest.digest);
  }
  for (const auto& ix : indexes) {
    for (const auto& img : ix.children) {
      for (const auto& l : img.layers) place_blob(blobs, store, l.digest);
      place_bytes(blobs, img.config_json, img.config.digest);
      place_bytes(blobs, img.manifest_json, img.manifest.digest);
    }
    place_bytes(blobs, ix.json, ix.digest);
  }

  json list = json::array();
  for (const auto& ti : images) {
    Descriptor d = ti.image.manifest;
    d.annotations["org.opencontainers.image.ref.name"] = layout_ref_name(ti.tag);
    list.push_back(d);
  }
  for (const auto& ix : indexes) {
    Descriptor d{kMediaTypeIndex, ix.digest, ix.json.size(), {{"org.opencontainers.image.ref.name", ix.ref}}, {}};
    list.push_back(d);
  }
  // What was there before stays, but for artifacts (an SBOM) whose image is
  // no longer listed: an image replaced under its ref name takes its
  // artifacts with it, so a layout rebuilt every month keeps no stale SBOMs.
  std::set<std::string> listed;
  for (const auto& k : kept)
    if (!k.contains("artifactType")) listed.insert(k.value("digest", ""));
  for (const auto& d : list) listed.insert(d.value("digest", ""));
  json old_entries = json::array();
  for (auto& k : kept) {
    std::optional<Digest> subject;
    try {
      subject = subject_of(dir, k);
    } catch (const Error&) {  // another tool's artifact we cannot read: left as it is
    }
    if (!subject || listed.count(subject->str())) old_entries.push_back(k);
  }
  for (auto& d : list) old_entries.push_back(d);
  list = old_entries;
  json index{{"schemaVersion", 2}, {"mediaType", kMediaTypeIndex}, {"manifests", list}};
  write_file_atomic(index_file, index.dump(2) + "\n");
}

std::string artifact_manifest_json(const std::string& artifact_type, const Descriptor& file, const Descriptor& subject,
                                   const std::map<std::string, std::string>& annotations) {
  json m{{"schemaVersion", 2},
         {"mediaType", kMediaTypeManifest},
         {"artifactType", artifact_type},
         {"config", {{"mediaType", kMediaTypeEmpty}, {"digest", Digest::of_bytes("{}").str()}, {"size", 2}}},
         {"layers", json::array({{{"mediaType", file.media_type}, {"digest", file.digest.str()}, {"size", file.size}}})},
         {"subject", {{"mediaType", subject.media_type}, {"digest", subject.digest.str()}, {"size", subject.size}}}};
  if (!annotations.empty()) m["annotations"] = annotations;
  return m.dump();
}

// The subject of the artifact manifest a layout entry names, if it is one.
static std::optional<Digest> subject_of(const fs::path& dir, const json& entry, std::string* manifest_json) {
  if (!entry.is_object() || !entry.contains("artifactType")) return std::nullopt;
  try {
    std::string bytes = read_file(checked_blob(dir, entry));
    json m = json::parse(bytes);
    if (!m.contains("subject")) return std::nullopt;
    if (manifest_json) *manifest_json = bytes;
    return Digest::parse(m["subject"].at("digest").get<std::string>());
  } catch (const json::exception& e) {
    throw Error("a malformed artifact manifest in " + dir.string() + ": " + e.what());
  }
}

Digest add_layout_artifact(const fs::path& dir, const std::string& artifact_type, const std::string& bytes,
                           const Descriptor& subject, const std::map<std::string, std::string>& annotations) {
  fs::path blobs = dir / "blobs" / "sha256";
  if (::access((blobs / subject.digest.hex()).c_str(), F_OK) != 0)
    throw Error("layout " + dir.string() + " lacks the image " + subject.digest.str() + " to attach an artifact to");
  FileLock lock(dir / ".stackbuild.lock");
  Descriptor file{artifact_type, Digest::of_bytes(bytes), bytes.size(), {}, {}};
  std::string manifest = artifact_manifest_json(artifact_type, file, subject, annotations);
  Digest digest = Digest::of_bytes(manifest);
  place_bytes(blobs, "{}", Digest::of_bytes("{}"));
  place_bytes(blobs, bytes, file.digest);
  place_bytes(blobs, manifest, digest);

  fs::path index_file = dir / "index.json";
  json index;
  try {
    index = json::parse(read_file(index_file));
  } catch (const json::exception& e) {
    throw Error(index_file.string() + " is not valid JSON: " + e.what());
  }
  json list = json::array();
  for (const auto& m : index.value("manifests", json::array())) {
    bool same = m.is_object() && m.value("artifactType", "") == artifact_type && subject_of(dir, m) == subject.digest;
    if (!same) list.push_back(m);
  }
  json d{{"mediaType", kMediaTypeManifest}, {"digest", digest.str()}, {"size", manifest.size()},
         {"artifactType", artifact_type}};
  if (!annotations.empty()) d["annotations"] = annotations;
  list.push_back(d);
  index["manifests"] = list;
  write_file_atomic(index_file, index.dump(2) + "\n");
  return digest;
}

std::vector<LayoutArtifact> layout_referrers(const fs::path& dir, const Digest& subject) {
  std::vector<LayoutArtifact> out;
  json index;
  try {
    index = json::parse(read_file(dir / "index.json"));
  } catch (const json::exception& e) {
    throw Error((dir / "index.json").string() + ": " + e.what());
  }
  for (const auto& m : index.value("manifests", json::array())) {
    std::string manifest_json;
    if (subject_of(dir, m, &manifest_json) != subject) continue;
    try {
      json a = json::parse(manifest_json);
      const json& layers = a.at("layers");
      if (layers.size() != 1) continue;  // not one of the one-file artifacts written here
      out.push_back({m.at("artifactType").get<std::string>(), Digest::parse(m.at("digest").get<std::string>()),
                     manifest_json, subject, checked_blob(dir, layers[0])});
    } catch (const json::exception& e) {
      throw Error("a malformed artifact manifest in " + dir.string() + ": " + e.what());
    }
  }
  return out;
}

void write_docker_archive(const fs::path& out, const Store& store, const std::vector<TaggedImage>& images) {
  auto scratch = store.temp_dir();
  std::vector<TarMember> members;
  std::set<std::string> added;
  // One manifest.json item per image, listing all its tags, as `docker save`
  // writes it (skopeo refuses an archive whose items repeat an image).
  json manifest = json::array();
  std::map<std::string, size_t> item_of;  // manifest digest -> index in `manifest`
  for (const auto& ti : images) {
    std::string tag = ti.tag.find(':') == std::string::npos ? ti.tag + ":latest" : ti.tag;
    auto known = item_of.find(ti.image.manifest.digest.hex());
    if (known != item_of.end()) {
      manifest[known->second]["RepoTags"].push_back(tag);
      continue;
    }
    json layers = json::array();
    for (const auto& l : ti.image.layers) {
      std::string name = l.diff_id.hex() + "/layer.tar";
      layers.push_back(name);
      if (!added.insert(name).second) continue;
      fs::path tar = scratch->path() / (l.diff_id.hex() + ".tar");
      decompress_layer(store.blob_path(l.digest), tar);
      members.push_back({name, {}, tar});
    }
    std::string config_name = ti.image.config.digest.hex() + ".json";
    if (added.insert(config_name).second) members.push_back({config_name, ti.image.config_json, {}});
    item_of[ti.image.manifest.digest.hex()] = manifest.size();
    manifest.push_back(json{{"Config", config_name}, {"RepoTags", json::array({tag})}, {"Layers", layers}});
  }
  members.push_back({"manifest.json", manifest.dump() + "\n", {}});

  AtomicFile f(out, 0644);
  FdSink sink(f.fd(), out.string());
  write_plain_tar(members, sink);
  f.commit();
}

std::pair<fs::path, std::string> split_layout_ref(const std::string& arg) {
  if (fs::is_directory(arg)) return {arg, ""};
  auto colon = arg.rfind(':');
  auto slash = arg.rfind('/');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash))
    throw Error("no OCI layout at " + arg, ErrorKind::Usage);
  return {arg.substr(0, colon), arg.substr(colon + 1)};
}

// Whether `a` and `b` are one file (hard links to one inode).
static bool same_file(const fs::path& a, const fs::path& b) {
  struct stat st_a, st_b;
  return ::stat(a.c_str(), &st_a) == 0 && ::stat(b.c_str(), &st_b) == 0 && st_a.st_dev == st_b.st_dev &&
         st_a.st_ino == st_b.st_ino;
}

// A layout blob's path, after checking its size and digest (not hashed when
// it is `store`'s own file).
// The blob a descriptor names, its size checked and (with `hash`) its digest.
static fs::path checked_blob(const fs::path& layout, const json& desc, const Store* store, bool hash) {
  Digest d = Digest::parse(desc.at("digest").get<std::string>());
  fs::path p = layout / "blobs" / "sha256" / d.hex();
  if (::access(p.c_str(), R_OK) != 0) throw Error("layout " + layout.string() + " lacks blob " + d.str());
  if (desc.contains("size") && fs::file_size(p) != desc["size"].get<uint64_t>())
    throw Error("blob " + p.string() + " has " + std::to_string(fs::file_size(p)) + " bytes, its descriptor says " +
                std::to_string(desc["size"].get<uint64_t>()));
  if (!hash || (store && same_file(p, store->blob_path(d)))) return p;
  check_blob_digest(p, d);
  return p;
}

void check_blob_digest(const fs::path& blob, const Digest& d) {
  if (Digest::of_file(blob) != d) throw Error("blob " + blob.string() + " does not match its digest " + d.str());
}

std::string host_platform() {
  struct utsname u {};
  ::uname(&u);
  return "linux/" + oci_architecture(u.machine);
}

LayoutImage open_layout_image(const fs::path& layout, const std::string& ref, const Store* store,
                              const std::string& platform, LayerDigests layer_digests) {
  json index;
  try {
    index = json::parse(read_file(layout / "index.json"));
  } catch (const json::exception& e) {
    throw Error((layout / "index.json").string() + ": " + e.what());
  }
  const json none = json::array();
  const json* chosen = nullptr;
  std::vector<std::string> refs;
  try {
    if (!index.is_object()) throw Error((layout / "index.json").string() + ": not a JSON object");
    // In place, not a copy: an error names /manifests/N/...
    const json& manifests = index.contains("manifests") ? index["manifests"] : none;
    if (!manifests.is_array()) throw Error((layout / "index.json").string() + ": 'manifests' is not a list");
    for (const auto& m : manifests) {
      std::string r = m.is_object() ? m.value("annotations", json::object()).value("org.opencontainers.image.ref.name", "") : "";
      refs.push_back(r);
      if (!ref.empty() && r == ref) chosen = &m;
    }
    if (ref.empty()) {  // the one image, artifacts aside
      std::vector<const json*> images;
      for (const auto& m : manifests)
        if (m.is_object() && !m.contains("artifactType")) images.push_back(&m);
      if (images.size() == 1) chosen = images.front();
    }
  } catch (const json::exception& e) {
    throw Error((layout / "index.json").string() + ": " + e.what());
  }
  if (!chosen) {
    std::string list;
    for (const auto& r : refs) list += (list.empty() ? "" : ", ") + r;
    throw Error(ref.empty() ? "layout holds several images; name one of: " + list
                            : "no image '" + ref + "' in " + layout.string() + " (it has: " + list + ")");
  }
  std::string where = (layout / "index.json").string();  // the document a json exception is about
  json from_index;  // the manifest's descriptor when the ref names an image index (one per platform)
  try {
    if (chosen->value("mediaType", "") == kMediaTypeIndex) {
      std::string ref_name = chosen->value("annotations", json::object()).value("org.opencontainers.image.ref.name", "");
      where = "index " + chosen->at("digest").get<std::string>() + " in " + layout.string();
      json ix = json::parse(read_file(checked_blob(layout, *chosen, store)));
      std::string want = platform.empty() ? host_platform() : platform, have;
      for (const auto& m : ix.at("manifests")) {
        const json p = m.value("platform", json::object());
        std::string name = p.value("os", "?") + "/" + p.value("architecture", "?");
        have += (have.empty() ? "" : ", ") + name;
        if (from_index.is_null() && name == want && m.value("mediaType", "") == kMediaTypeManifest) from_index = m;
      }
      if (from_index.is_null())
        throw Error("'" + ref_name + "' in " + layout.string() + " is an image index with no image for " + want +
                    " (it has: " + have + ")" + (platform.empty() ? "; choose one with --platform" : ""));
      from_index["annotations"]["org.opencontainers.image.ref.name"] = ref_name;
      chosen = &from_index;
    } else if (!platform.empty()) {
      std::string config = read_file(checked_blob(layout, json::parse(read_file(checked_blob(layout, *chosen, store))).at("config"), store));
      ImageConfig c = read_image_config(config, "the config of " + chosen->at("digest").get<std::string>());
      if (c.os + "/" + c.architecture != platform)
        throw Error("'" + ref + "' in " + layout.string() + " is an image for " + c.os + "/" + c.architecture +
                    ", not " + platform);
    }
    std::string manifest_json = read_file(checked_blob(layout, *chosen, store));
    where = "manifest " + chosen->at("digest").get<std::string>() + " in " + layout.string();
    json manifest = json::parse(manifest_json);
    std::string config_json = read_file(checked_blob(layout, manifest.at("config"), store));
    std::vector<fs::path> layers;
    std::vector<Digest> layer_digest_list;
    for (const auto& l : manifest.at("layers")) {
      layers.push_back(checked_blob(layout, l, store, layer_digests == LayerDigests::Checked));
      layer_digest_list.push_back(Digest::parse(l.at("digest").get<std::string>()));
    }
    // A diff_id for each layer, as pull checks a registry's images.
    std::string config =
        "config " + manifest["config"].at("digest").get<std::string>() + " in " + layout.string();
    std::vector<Digest> diff_ids =
        read_diff_ids(parse_config_document(config_json, config), config);
    if (diff_ids.size() != layers.size())
      throw Error(config + " lists " + std::to_string(diff_ids.size()) + " diff_ids for " +
                  std::to_string(layers.size()) + " layers");
    std::string r = chosen->value("annotations", json::object()).value("org.opencontainers.image.ref.name", "");
    return LayoutImage{Digest::parse(chosen->at("digest").get<std::string>()), r, manifest_json, config_json, layers,
                       layer_digest_list};
  } catch (const json::exception& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace sb

#include "fetch/redist/install.hpp"

#include <nlohmann/json.hpp>

#include "archive/extract.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/limits.hpp"

namespace sb::redist {

namespace {

// The destination below usr/local/cuda-X.Y of an archive member, "" to skip.
std::string map_path(const std::string& clean, const std::string& component) {
  size_t slash = clean.find('/');
  if (slash == std::string::npos) return "";  // the top directory itself
  std::string rest = clean.substr(slash + 1);
  if (rest == "LICENSE" || rest == "LICENSE.txt") return "share/doc/" + component + "/" + rest;
  if (rest == "lib") return "lib64";
  if (rest.starts_with("lib/")) return "lib64/" + rest.substr(4);
  return rest;
}

}  // namespace

size_t install_archive(const fs::path& file, const std::string& label, const std::string& component,
                       const std::string& cuda_xy, const fs::path& root, std::vector<std::string>* written) {
  // The safe extractor (archive/extract.hpp): every path resolved inside
  // `root` and never through a symlink, hardlinks copied from files inside,
  // symlinks kept inside the archive's tree.
  const std::string base = "usr/local/cuda-" + cuda_xy;
  ArchiveOptions o;
  o.label = label;
  o.map = [&](const std::string& clean) {
    std::string mapped = map_path(clean, component);
    return mapped.empty() ? mapped : base + "/" + mapped;
  };
  o.normalize_modes = true;
  o.copy_hardlinks = true;
  o.links_inside = base;
  std::vector<std::string> paths = extract_archive(file, root, o);
  if (written) written->insert(written->end(), paths.begin(), paths.end());
  return paths.size();
}

void finish_layout(const std::string& cuda_xy, const fs::path& root) {
  fs::path local = root / "usr/local";
  fs::create_directories(local);
  fs::path link = local / "cuda";
  fs::remove(link);
  fs::create_symlink("cuda-" + cuda_xy, link);
  fs::create_directories(root / "etc/ld.so.conf.d");
  write_file_atomic(root / "etc/ld.so.conf.d" / ("000_cuda-" + cuda_xy + ".conf"), "/usr/local/cuda-" + cuda_xy + "/lib64\n");
}

void write_version_json(const std::string& cuda_xy, const std::string& release,
                        const std::vector<std::pair<std::string, std::string>>& components, const fs::path& root) {
  nlohmann::json j = nlohmann::json::object();  // keys sorted: the same bytes every time
  j["cuda"] = {{"name", "CUDA SDK"}, {"version", release}};
  for (const auto& [component, version] : components) j[component] = {{"version", version}};
  fs::path dir = root / "usr/local" / ("cuda-" + cuda_xy);
  fs::create_directories(dir);
  write_file_atomic(dir / "version.json", j.dump(2) + "\n");
}

std::vector<Fetched> install_components(const std::string& base, const std::string& product,
                                        const std::string& manifest_version, const std::vector<std::string>& components,
                                        const std::string& platform, const std::string& cuda_xy, const fs::path& root,
                                        const Store& store, fetch::Fetcher& fetcher) {
  std::string murl = manifest_url(base, product, manifest_version);
  fetch::FetchItem manifest_item{murl, std::nullopt, std::nullopt, "redistrib_" + manifest_version + ".json"};
  manifest_item.max_size = limits::redist_manifest();  // nothing pins its size
  auto mf = fetcher.fetch_one(manifest_item);
  Manifest m = parse_manifest(store.read(mf.digest), murl);
  int major = std::stoi(cuda_xy.substr(0, cuda_xy.find('.')));
  std::vector<Selected> sel = select(m, components, platform, major);
  std::vector<fetch::FetchItem> items;
  for (const auto& s : sel)
    items.push_back({artifact_url(base, product, s.artifact), Digest::parse("sha256:" + s.artifact.sha256),
                     s.artifact.size, fs::path(s.artifact.relative_path).filename().string()});
  auto got = fetcher.fetch(items);
  std::vector<Fetched> out;
  for (size_t i = 0; i < sel.size(); ++i) {
    install_archive(store.blob_path(got[i].digest), items[i].label, sel[i].component, cuda_xy, root);
    out.push_back({items[i].url, sel[i], got[i].digest});
  }
  if (product == "cuda") {
    std::vector<std::pair<std::string, std::string>> versions;
    for (const auto& s : sel) versions.emplace_back(s.component, s.version);
    write_version_json(cuda_xy, manifest_version, versions, root);
  }
  finish_layout(cuda_xy, root);
  return out;
}

}  // namespace sb::redist

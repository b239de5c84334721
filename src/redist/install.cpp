#include "redist/install.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "layer/libarchive.hpp"
#include "layer/tree.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::redist {

namespace {

// Refuses to write through a symlink: every existing parent of `rel` under
// `root` must be a real directory.
void check_parents(const fs::path& root, const fs::path& rel, const std::string& what) {
  fs::path p = root;
  for (auto it = rel.begin(); it != rel.end(); ++it) {
    if (std::next(it) == rel.end()) break;
    p /= *it;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return;  // not there yet: made below
    if (!S_ISDIR(st.st_mode)) throw Error(what + ": '" + rel.string() + "' goes through a non-directory");
  }
}

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
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_zip(a.get());
  if (archive_read_open_filename(a.get(), file.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error(label + ": " + archive_why(a.get()));
  fs::path base = fs::path("usr/local") / ("cuda-" + cuda_xy);
  archive_entry* e;
  size_t count = 0;
  int rc;
  std::vector<char> buf(1 << 17);
  while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    std::string clean;
    try {
      if (name.starts_with("/")) throw Error("absolute path");
      clean = canonical_archive_path(name);
    } catch (const Error& err) {
      throw Error(label + " holds '" + name + "': " + err.what());
    }
    std::string mapped = map_path(clean, component);
    if (mapped.empty()) continue;
    fs::path rel = base / mapped;
    check_parents(root, rel, label);
    fs::path dest = root / rel;
    auto type = archive_entry_filetype(e);
    const char* hard = archive_entry_hardlink(e);
    if (type == AE_IFDIR) {
      fs::create_directories(dest);
      ::chmod(dest.c_str(), 0755);
    } else if (hard) {
      std::string target = map_path(canonical_archive_path(hard), component);
      if (target.empty()) throw Error(label + ": hardlink '" + name + "' to nothing");
      check_parents(root, base / target, label);
      fs::create_directories(dest.parent_path());
      fs::remove(dest);
      fs::copy_file(root / base / target, dest);
    } else if (type == AE_IFLNK) {
      std::string target = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
      // Links stay inside the archive's tree: relative, no climbing out of it.
      fs::path resolved = (fs::path(mapped).parent_path() / target).lexically_normal();
      if (target.empty() || target.starts_with("/") || resolved.string().starts_with(".."))
        throw Error(label + ": symlink '" + name + "' -> '" + target + "' leaves the archive");
      fs::create_directories(dest.parent_path());
      fs::remove(dest);
      fs::create_symlink(target, dest);
    } else if (type == AE_IFREG) {
      fs::create_directories(dest.parent_path());
      fs::remove(dest);
      int mode = (archive_entry_perm(e) & 0111) ? 0755 : 0644;
      UniqueFd fd(::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
      if (fd.get() < 0) throw_errno("create " + dest.string());
      la_ssize_t n;
      while ((n = archive_read_data(a.get(), buf.data(), buf.size())) > 0)
        write_all(fd.get(), buf.data(), static_cast<size_t>(n), dest.string());
      if (n < 0) throw Error(label + ": reading '" + name + "': " + archive_why(a.get()));
      ::fchmod(fd.get(), static_cast<mode_t>(mode));
    } else {
      throw Error(label + " holds '" + name + "', which is not a file, directory or link");
    }
    if (written) written->push_back(rel.generic_string());
    ++count;
  }
  if (rc != ARCHIVE_EOF) throw Error(label + ": " + archive_why(a.get()));
  return count;
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
  auto mf = fetcher.fetch_one({murl, std::nullopt, std::nullopt, "redistrib_" + manifest_version + ".json"});
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

// Reading an image's layers for the files that record what is installed, and
// stacking them as an unpacked image would have them.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <future>
#include <optional>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "archive/libarchive.hpp"
#include "archive/read.hpp"
#include "archive/utf8_locale.hpp"
#include "image/sbom.hpp"
#include "layer/tree.hpp"
#include "util/error.hpp"
#include "util/interrupt.hpp"

namespace sb::sbom {

using json = nlohmann::json;

namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";
// dpkg's status of a large image is a few MiB; nothing the SBOM reads is near this.
constexpr size_t kMaxFile = 256u << 20;
constexpr int kRecordFormat = 3;  // of the sbom-layer records

// The last component of `p`, and the directory before it ("" at the top).
std::pair<std::string_view, std::string_view> split_last(std::string_view p) {
  size_t slash = p.rfind('/');
  if (slash == std::string_view::npos) return {"", p};
  return {p.substr(0, slash), p.substr(slash + 1)};
}

bool python_dir(std::string_view dir) {
  auto [parent, base] = split_last(dir);
  return base == "site-packages" || base == "dist-packages";
}

// Python metadata holds a description after its headers; only the headers are kept.
bool is_python_metadata(std::string_view p) {
  auto [dir, base] = split_last(p);
  auto [parent, project] = split_last(dir);
  if ((base == "METADATA" && project.ends_with(".dist-info")) || (base == "PKG-INFO" && project.ends_with(".egg-info")))
    return python_dir(parent);
  return base.ends_with(".egg-info") && python_dir(dir);  // distutils' single-file form
}

}  // namespace

bool wanted_path(std::string_view p) {
  if (p == "etc/os-release" || p == "usr/lib/os-release" || p == "var/lib/dpkg/status" || p == "lib/apk/db/installed")
    return true;
  auto [dir, base] = split_last(p);
  if (dir == "var/lib/dpkg/status.d") return !base.ends_with(".md5sums") && !base.starts_with(".");
  auto cuda_tree = [](std::string_view d) {
    auto [parent, top] = split_last(d);
    return parent == "usr/local" && (top == "cuda" || top.starts_with("cuda-"));
  };
  if (base == "copyright") return split_last(dir).first == "usr/share/doc";  // a Debian package's licenses
  if (base == "version.json") return cuda_tree(dir);
  // cuDNN and NCCL unpacked from NVIDIA's redist archives into the CUDA tree.
  if (base == "cudnn_version.h" || base == "nccl.h") {
    auto [tree, include] = split_last(dir);
    return include == "include" && cuda_tree(tree);
  }
  return is_python_metadata(p);
}

namespace {

// Whether a directory at `p` could hold a file of interest (wanted_path()),
// so that a file at `p` hides what the layers below have there.
bool could_hold_wanted(std::string_view p) {
  for (std::string_view fixed : {"etc/os-release", "usr/lib/os-release", "var/lib/dpkg/status.d/",
                                 "lib/apk/db/installed", "usr/local/cuda/include/", "usr/share/doc/"})
    if (fixed.size() > p.size() && fixed.starts_with(p) && fixed[p.size()] == '/') return true;
  auto [dir, base] = split_last(p);
  if (dir == "usr/local" && base.starts_with("cuda")) return true;  // a CUDA tree
  if (base == "include" || base == "status.d" || dir == "usr/share/doc") return true;
  return base == "site-packages" || base == "dist-packages" || base.ends_with(".dist-info") ||
         base.ends_with(".egg-info");
}

}  // namespace

LayerFiles scan_layer(const fs::path& blob) {
  LayerFiles out;
  Utf8Locale locale;
  LayerReader a(blob);
  std::string buf(1 << 16, '\0');
  while (archive_entry* e = a.next()) {
    check_interrupted();
    const char* raw = archived_name(archive_entry_pathname_utf8(e), archive_entry_pathname(e));
    if (!raw) throw Error("layer " + blob.string() + ": an entry without a name");
    std::string p = canonical_archive_path(raw);
    auto [dir, base] = split_last(p);
    if (base == kOpaque) {
      out.opaque.emplace_back(dir);
      continue;
    }
    if (base.starts_with(kWhiteout)) {
      std::string gone = std::string(dir) + (dir.empty() ? "" : "/") + std::string(base.substr(kWhiteout.size()));
      out.removed.push_back(gone);
      continue;
    }
    auto type = archive_entry_filetype(e);
    bool hardlink = archive_entry_hardlink(e) != nullptr;
    if (!wanted_path(p)) {
      // A link (or a file) where the layers below have a directory replaces
      // it, and what it held is gone: /usr/local/cuda-12.6 made a link to
      // another tree. Every link counts (a link can stand for any directory
      // above a site directory); files only where such a directory could be.
      if (type == AE_IFLNK || (type != AE_IFDIR && could_hold_wanted(p))) out.removed.push_back(p);
      continue;
    }
    if (hardlink) {  // to an earlier path of this layer: the same content
      const char* t = archived_name(archive_entry_hardlink_utf8(e), archive_entry_hardlink(e));
      auto target = out.files.find(canonical_archive_path(t));
      if (target != out.files.end() && is_python_metadata(p) == is_python_metadata(target->first)) {
        out.files[p] = std::string(target->second);
        continue;
      }
    }
    if (type != AE_IFREG || hardlink) {  // a link or directory where such a file was hides it
      out.removed.push_back(p);
      continue;
    }
    std::string text;
    const bool headers_only = is_python_metadata(p);
    for (la_ssize_t n; (n = archive_read_data(a.get(), buf.data(), buf.size())) > 0;) {
      text.append(buf.data(), static_cast<size_t>(n));
      if (headers_only && text.find("\n\n") != std::string::npos) break;
      if (text.size() > kMaxFile)
        throw Error("layer " + blob.string() + ": /" + p + " is over " + std::to_string(kMaxFile >> 20) + " MiB");
    }
    if (headers_only) {
      if (size_t end = text.find("\n\n"); end != std::string::npos) text.resize(end + 1);
    }
    if (base == "copyright") text = reduce_copyright(text);
    out.files[p] = std::move(text);
  }
  return out;
}

json layer_files_json(const LayerFiles& l) {
  return {{"files", l.files}, {"removed", l.removed}, {"opaque", l.opaque}};
}

std::map<std::string, std::string> image_files(const Store& store,
                                               const std::vector<std::pair<Digest, fs::path>>& layers) {
  std::vector<std::optional<LayerFiles>> read(layers.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Digest& digest = layers[i].first;
    if (auto rec = store.get_record("sbom-layer", digest)) {
      try {
        json j = json::parse(*rec);
        // Format 2: links (and files where a directory of interest was) are
        // among `removed`; 3: Debian's copyright files are read.
        if (j.value("layer", "") == digest.str() && j.value("format", 1) == kRecordFormat) {
          read[i] = layer_files_from_json(j);
          continue;
        }
      } catch (const std::exception&) {  // a damaged record: read the layer again
      }
    }
    todo.push_back(i);
  }
  // The layers not read before, side by side: each is inflated and parsed on
  // a thread of its own (bounded by the cores), as most of a layer is skipped.
  size_t width = std::max<size_t>(1, std::min<size_t>(todo.size(), std::thread::hardware_concurrency()));
  for (size_t start = 0; start < todo.size(); start += width) {
    std::vector<std::future<LayerFiles>> running;
    for (size_t k = start; k < std::min(todo.size(), start + width); ++k) {
      const fs::path& blob = layers[todo[k]].second;
      try {
        running.push_back(std::async(std::launch::async, [&blob] { return scan_layer(blob); }));
      } catch (const std::system_error&) {  // no thread to be had: read it here
        running.push_back(std::async(std::launch::deferred, [&blob] { return scan_layer(blob); }));
      }
    }
    std::exception_ptr failed;
    for (size_t k = 0; k < running.size(); ++k) {
      try {
        read[todo[start + k]] = running[k].get();
      } catch (...) {  // every scan is waited for before the first failure is thrown
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  }
  std::vector<LayerFiles> stacked;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (std::find(todo.begin(), todo.end(), i) != todo.end()) {
      json j = layer_files_json(*read[i]);
      j["layer"] = layers[i].first.str();
      j["format"] = kRecordFormat;
      store.put_record("sbom-layer", layers[i].first, j.dump());
    }
    stacked.push_back(std::move(*read[i]));
  }
  return stack_layers(stacked);
}

LayerFiles layer_files_from_json(const json& j) {
  LayerFiles l;
  l.files = j.at("files").get<std::map<std::string, std::string>>();
  l.removed = j.at("removed").get<std::vector<std::string>>();
  l.opaque = j.at("opaque").get<std::vector<std::string>>();
  return l;
}

std::map<std::string, std::string> stack_layers(const std::vector<LayerFiles>& layers) {
  std::map<std::string, std::string> files;
  // Removes `p` and everything below it.
  auto remove_tree = [&](const std::string& p, bool keep_self) {
    if (!keep_self) files.erase(p);
    std::string prefix = p.empty() ? "" : p + "/";
    for (auto it = files.lower_bound(prefix); it != files.end() && it->first.starts_with(prefix);)
      it = files.erase(it);
  };
  for (const auto& l : layers) {
    // A layer's whiteouts hide what the layers below hold, never its own files.
    for (const auto& d : l.opaque) remove_tree(d, true);
    for (const auto& r : l.removed) remove_tree(r, false);
    for (const auto& [p, text] : l.files) files[p] = text;
  }
  return files;
}

}  // namespace sb::sbom

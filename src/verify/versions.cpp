#include "verify/versions.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/c_header.hpp"
#include "util/file.hpp"
#include "util/number.hpp"
#include "util/status.hpp"
#include "util/text.hpp"

namespace sb::verify {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "12.6" from `#define CUDART_VERSION 12060`.
std::string cudart_version(const std::string& text) {
  auto d = c_defines(text);
  auto it = d.find("CUDART_VERSION");
  if (it == d.end() || !all_digits(it->second)) return {};
  auto parsed = parse_integer<int>(it->second);
  if (!parsed) return {};
  int n = *parsed;
  return std::to_string(n / 1000) + "." + std::to_string(n % 1000 / 10);
}

std::string major_minor(const std::string& v) {
  size_t dot = v.find('.');
  if (dot == std::string::npos) return v;
  size_t second = v.find('.', dot + 1);
  return second == std::string::npos ? v : v.substr(0, second);
}

// A distribution name as PEP 503 normalizes it: lower case, runs of -_. as '-'.
std::string normalized(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool sep = c == '-' || c == '_' || c == '.';
    if (sep) {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// The component a wheel (normalized name) states the version of, and whether
// only its major.minor is the component's: the CUDA runtime wheel carries its
// own patch level (12.6.77 in CUDA 12.6.3).
struct WheelComponent {
  std::string component;
  bool major_minor_only = false;
};
std::optional<WheelComponent> wheel_component(const std::string& name) {
  auto is = [&](const std::string& base) {
    if (name == base) return true;  // CUDA 13's wheels drop the -cuXY suffix
    if (name.rfind(base + "-cu", 0) != 0) return false;
    return all_digits(name.substr(base.size() + 3));
  };
  if (is("nvidia-cudnn")) return WheelComponent{"cudnn"};
  if (is("nvidia-nccl")) return WheelComponent{"nccl"};
  if (is("nvidia-cuda-runtime")) return WheelComponent{"cuda", true};
  return std::nullopt;
}

// `NAME = 'VALUE'` or `NAME: Type = 'VALUE'` in a Python file.
std::map<std::string, std::string> python_assignments(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos || line.empty() || line[0] == ' ' || line[0] == '#') continue;
    std::string name = trim(line.substr(0, std::min(eq, line.find(':'))));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() < 2 || (value[0] != '\'' && value[0] != '"') || value.back() != value[0]) continue;
    out.emplace(name, value.substr(1, value.size() - 2));
  }
  return out;
}

class Finder {
 public:
  explicit Finder(const ImageRoot& root) : root_(root) {}

  // The host path of image file `p`, once per real file; nullopt when absent or seen.
  std::optional<fs::path> open(const std::string& p) {
    auto host = root_.resolve(p);
    std::error_code ec;
    if (!host || !fs::is_regular_file(*host, ec)) return std::nullopt;
    if (!seen_.insert(host->string()).second) return std::nullopt;
    return host;
  }

  void add(const std::string& component, const std::string& version, const std::string& compared,
           const std::string& file) {
    if (!version.empty()) found.push_back({component, version, compared.empty() ? version : compared, file});
  }

  void header(const std::string& p, const std::string& component) {
    auto host = open(p);
    if (!host) return;
    std::string text = read_file_or_empty(*host);
    if (component == "cuda") {
      add("cuda", cudart_version(text), "", p);
    } else {
      add(component, c_header_version(text, component == "cudnn" ? "CUDNN_" : "NCCL_"), "", p);
    }
  }

  void toolkit() {
    if (auto vj = open("/usr/local/cuda/version.json")) {
      try {
        std::ifstream in(*vj);
        auto j = nlohmann::json::parse(in);
        if (j.contains("cuda") && j["cuda"].is_object())
          add("cuda", j["cuda"].value("version", ""), "", "/usr/local/cuda/version.json");
      } catch (const std::exception&) {
      }
    }
    for (const char* p : {"/usr/include/cudnn_version.h", "/usr/local/cuda/include/cudnn_version.h",
                          "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
                          "/usr/include/aarch64-linux-gnu/cudnn_version_v9.h"})
      header(p, "cudnn");
    for (const char* p : {"/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h"}) header(p, "nccl");
    // A tree without version.json (Debian's nvidia-cuda-toolkit, one assembled from wheels).
    for (const char* p : {"/usr/local/cuda/include/cuda_runtime_api.h", "/usr/include/cuda_runtime_api.h"})
      header(p, "cuda");
  }

  void package_dir(const std::string& dir) {
    // NVIDIA's wheels: nvidia/<lib>/include/ (CUDA 13's runtime: nvidia/cu13/include/).
    for (const auto& lib : entries(dir + "/nvidia")) {
      std::string inc = dir + "/nvidia/" + lib + "/include/";
      header(inc + "cudnn_version.h", "cudnn");
      header(inc + "nccl.h", "nccl");
      header(inc + "cuda_runtime_api.h", "cuda");
    }
    // Their metadata: Name and Version of each *.dist-info.
    for (const auto& e : entries(dir)) {
      if (!e.ends_with(".dist-info")) continue;
      std::string meta = dir + "/" + e + "/METADATA";
      auto host = open(meta);
      if (!host) continue;
      std::string name, version, line;
      std::istringstream in(read_file_or_empty(*host));
      while (std::getline(in, line) && !trim(line).empty()) {
        if (line.rfind("Name:", 0) == 0) name = normalized(trim(line.substr(5)));
        if (line.rfind("Version:", 0) == 0) version = trim(line.substr(8));
      }
      if (auto wc = wheel_component(name))
        add(wc->component, version, wc->major_minor_only ? major_minor(version) : version, meta);
    }
    // PyTorch's own record of itself and the CUDA it was built with.
    std::string vp = dir + "/torch/version.py";
    if (auto host = open(vp)) {
      auto a = python_assignments(read_file_or_empty(*host));
      if (auto it = a.find("__version__"); it != a.end())
        add("pytorch", it->second, it->second.substr(0, it->second.find('+')), vp);  // 2.7.0+cu126
      if (auto it = a.find("cuda"); it != a.end()) add("cuda", it->second, "", vp);  // None on CPU builds
    }
  }

  std::vector<FoundVersion> found;

 private:
  // Names in image directory `dir`, sorted; none when it is not there.
  std::vector<std::string> entries(const std::string& dir) const {
    std::vector<std::string> out;
    auto host = root_.resolve(dir);
    std::error_code ec;
    if (!host || !fs::is_directory(*host, ec)) return out;
    for (const auto& e : fs::directory_iterator(*host, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  const ImageRoot& root_;
  std::set<std::string> seen_;
};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

std::vector<std::string> python_package_dirs(const ImageRoot& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root.root(), fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_symlink(ec) || !it->is_directory(ec)) continue;
    std::string name = it->path().filename().string();
    if (it.depth() == 0 && (name == "proc" || name == "sys" || name == "dev")) {
      it.disable_recursion_pending();
      continue;
    }
    if ((name == "site-packages" || name == "dist-packages") &&
        it->path().parent_path().filename().string().rfind("python", 0) == 0) {
      out.push_back(root.image_path(it->path()));
      it.disable_recursion_pending();  // nothing below is another package dir worth the walk
    } else if (it.depth() >= 8) {
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<FoundVersion> image_versions(const ImageRoot& root) {
  Finder f(root);
  f.toolkit();
  for (const auto& dir : python_package_dirs(root)) f.package_dir(dir);
  return f.found;
}

bool version_matches(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() < b.size() ? a : b;
  const std::string& longer = a.size() < b.size() ? b : a;
  return longer.compare(0, shorter.size(), shorter) == 0 &&
         (longer.size() == shorter.size() || longer[shorter.size()] == '.' || longer[shorter.size()] == '-');
}

TestResult check_versions(const ImageRoot& root, const std::map<std::string, std::string>& expected) {
  auto start = std::chrono::steady_clock::now();
  TestResult r{"static: versions match the lockfile", "static", Outcome::Passed, "", {}, 0};
  auto found = image_versions(root);
  std::set<std::string> compared, unexpected, files;
  for (const auto& f : found) {
    auto it = expected.find(f.component);
    if (it == expected.end()) {
      unexpected.insert(f.component + " " + f.version);
      continue;
    }
    compared.insert(f.component);
    files.insert(f.file);
    if (!version_matches(f.compared, it->second))
      r.details.push_back(f.component + ": " + f.file + " has " + f.version +
                          (f.compared != f.version ? " (compared as " + f.compared + ")" : "") + ", expected " +
                          it->second);
  }
  r.seconds = seconds_since(start);
  if (!r.details.empty()) {
    r.outcome = Outcome::Failed;
    r.message = std::to_string(r.details.size()) + " version mismatches";
  } else if (found.empty()) {
    r.outcome = Outcome::Skipped;
    r.message = "no CUDA, cuDNN, NCCL or PyTorch version in the image: no /usr/local/cuda/version.json, no cuDNN "
                "or NCCL header in /usr/include or /usr/local/cuda/include, no NVIDIA or torch wheel in a Python "
                "site- or dist-packages";
  } else if (compared.empty()) {
    r.outcome = Outcome::Skipped;
    r.message = "the image has " + join(unexpected) +
                " but no version is expected for them (no dev.stackbuild.version.* label, no --expect)";
  } else {
    r.message = join(compared) + " match in " + std::to_string(files.size()) + " files";
  }
  return r;
}

}  // namespace sb::verify

#include "verify/static_checks.hpp"

#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "util/error.hpp"
#include "util/glob.hpp"
#include "util/status.hpp"
#include "verify/elf.hpp"
#include "verify/fatbin.hpp"

namespace sb::verify {

namespace {

// Every regular ELF file of the image, in path order, with its parsed headers.
std::vector<std::pair<fs::path, ElfInfo>> elf_files(const ImageRoot& root) {
  std::vector<std::pair<fs::path, ElfInfo>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root.root(), fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec) || it->is_symlink(ec) || !is_elf(it->path())) continue;
    try {
      if (auto info = read_elf(it->path())) out.emplace_back(it->path(), *info);
    } catch (const Error&) {
      // A truncated or odd ELF (e.g. a test fixture) is not ours to judge here.
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

std::string expand_origin(std::string dir, const std::string& origin) {
  for (const char* token : {"$ORIGIN", "${ORIGIN}"}) {
    size_t pos;
    while ((pos = dir.find(token)) != std::string::npos) dir.replace(pos, strlen(token), origin);
  }
  for (const char* token : {"$LIB", "${LIB}"}) {
    size_t pos;
    while ((pos = dir.find(token)) != std::string::npos) dir.replace(pos, strlen(token), "lib64");
  }
  return dir;
}

// Sorts a check's findings, by file, into failures and those `ignore` lets
// through, and says so in the result.
class Findings {
 public:
  // `one` and `many` name findings in the message: "gap", "gaps".
  Findings(const std::vector<std::string>& ignore, std::string key, std::string one, std::string many)
      : ignore_(ignore), key_(std::move(key)), one_(std::move(one)), many_(std::move(many)) {
    used_.resize(ignore.size());
  }
  // `file` (an image path) has this problem.
  void add(const std::string& file, const std::string& problem) {
    for (size_t i = 0; i < ignore_.size(); ++i)
      if (glob_match(ignore_[i], file)) {
        used_[i] = true;
        ignored_files_.insert(file);
        ignored_.push_back("ignored (static_checks." + key_ + " " + ignore_[i] + "): " + file + ": " + problem);
        return;
      }
    failed_.push_back(file + ": " + problem);
  }
  size_t failures() const { return failed_.size(); }
  // Details: the failures, then the ignored findings, then unused globs;
  // the message gets ", but for N gaps ignored in M files (static_checks.KEY)".
  void finish(TestResult& r) const {
    r.details = failed_;
    r.details.insert(r.details.end(), ignored_.begin(), ignored_.end());
    for (size_t i = 0; i < ignore_.size(); ++i)
      if (!used_[i]) r.details.push_back("unused: static_checks." + key_ + " " + ignore_[i] + " matches no file with a finding");
    if (!ignored_.empty())
      r.message += (failed_.empty() ? ", but for " : "; and ") + counted(ignored_.size(), one_, many_) + " ignored in " +
                   counted(ignored_files_.size(), "file", "files") + " (static_checks." + key_ + ")";
  }

 private:
  const std::vector<std::string>& ignore_;
  std::string key_, one_, many_;
  std::vector<bool> used_;
  std::vector<std::string> failed_, ignored_;
  std::set<std::string> ignored_files_;
};

}  // namespace

bool is_driver_library(const std::string& name) {
  static const std::regex driver(
      R"((libcuda|libcudadebugger|libnvidia-[a-z0-9_-]+|libnvcuvid|libnvoptix|libvdpau_nvidia|libGLX_nvidia|libEGL_nvidia|libGLESv[12]_CM_nvidia|libGLESv2_nvidia)\.so(\..*)?)");
  return std::regex_match(name, driver);
}

TestResult check_libraries(const ImageRoot& root, const std::vector<std::string>& ld_library_path,
                           const std::vector<std::string>& ignore) {
  auto start = std::chrono::steady_clock::now();
  TestResult r{"static: libraries resolve", "static", Outcome::Passed, "", {}, 0};
  Findings findings(ignore, "libraries_ignore", "unresolved library", "unresolved libraries");
  const std::vector<std::string> system_dirs = root.linker_dirs();
  std::map<std::string, bool> found_cache;  // "class/machine|dir/name" -> loadable
  auto loadable = [&](const std::string& image_path, const ElfInfo& for_obj) {
    std::string key = std::to_string(for_obj.is64) + "/" + std::to_string(for_obj.machine) + "|" + image_path;
    auto it = found_cache.find(key);
    if (it != found_cache.end()) return it->second;
    bool ok = false;
    if (auto host = root.resolve(image_path); host && fs::is_regular_file(*host)) {
      try {
        auto lib = read_elf(*host);
        ok = lib && lib->is64 == for_obj.is64 && lib->machine == for_obj.machine;
      } catch (const Error&) {
      }
    }
    return found_cache[key] = ok;
  };
  size_t objects = 0;
  for (const auto& [file, info] : elf_files(root)) {
    if (!info.dynamic) continue;
    ++objects;
    std::string self = root.image_path(file);
    std::string origin = fs::path(self).parent_path().string();
    if (!info.interpreter.empty() && !root.resolve(info.interpreter))
      findings.add(self, "its interpreter " + info.interpreter + " is not in the image");
    std::vector<std::string> dirs;
    if (info.runpath.empty())
      for (const auto& d : info.rpath) dirs.push_back(expand_origin(d, origin));
    dirs.insert(dirs.end(), ld_library_path.begin(), ld_library_path.end());
    for (const auto& d : info.runpath) dirs.push_back(expand_origin(d, origin));
    dirs.insert(dirs.end(), system_dirs.begin(), system_dirs.end());
    for (const auto& need : info.needed) {
      if (is_driver_library(need)) continue;
      bool ok = false;
      if (need.find('/') != std::string::npos) {
        ok = loadable(need[0] == '/' ? need : origin + "/" + need, info);
      } else {
        for (const auto& d : dirs)
          if ((ok = loadable(d + "/" + need, info))) break;
      }
      if (!ok) findings.add(self, "needs " + need + ", which is not in the image");
    }
  }
  r.seconds = seconds_since(start);
  if (findings.failures()) {
    r.outcome = Outcome::Failed;
    r.message = counted(findings.failures(), "unresolved library", "unresolved libraries") + " in " +
                counted(objects, "dynamic ELF file", "dynamic ELF files");
  } else {
    r.message = counted(objects, "dynamic ELF file", "dynamic ELF files") + " checked";
  }
  findings.finish(r);
  return r;
}

CudaBinaries cuda_binaries(const ImageRoot& root) {
  CudaBinaries out;
  for (const auto& [file, info] : elf_files(root)) {
    try {
      GpuCode code = gpu_code_of(file);
      if (!code.empty()) out.code.emplace_back(root.image_path(file), std::move(code));
    } catch (const Error& e) {
      out.broken.emplace_back(root.image_path(file), e.what());
    }
  }
  return out;
}

namespace {

// The arch check over `binaries` for `want` (sm numbers), named `name`; its
// message says the code is there for `what` ("every requested arch").
TestResult arch_check(const CudaBinaries& binaries, const std::vector<int>& want,
                      const std::vector<std::string>& ignore, TestResult r,
                      const std::string& what) {
  auto start = std::chrono::steady_clock::now();
  Findings findings(ignore, "arch_ignore", "gap", "gaps");
  for (const auto& [file, error] : binaries.broken) findings.add(file, error);
  for (const auto& [file, code] : binaries.code)
    for (int sm : want)
      if (!runs_on(code, sm)) {
        std::string have;
        for (int s : code.sass) have += (have.empty() ? "" : " ") + std::string("sm_") + std::to_string(s);
        for (int p : code.ptx) have += (have.empty() ? "" : " ") + std::string("compute_") + std::to_string(p);
        findings.add(file, "no code for sm_" + std::to_string(sm) + " (has " + have + ")");
      }
  const size_t n = binaries.code.size();
  r.seconds = seconds_since(start);
  if (findings.failures()) {
    r.outcome = Outcome::Failed;
    r.message = counted(findings.failures(), "gap", "gaps") + " in " +
                counted(n, "CUDA binary", "CUDA binaries");
  } else if (n == 0) {
    r.outcome = Outcome::Skipped;
    r.message = "the image holds no CUDA binaries";
  } else {
    r.message = (n == 1 ? "1 CUDA binary carries" : std::to_string(n) + " CUDA binaries carry") +
                " code for " + what;
  }
  findings.finish(r);
  return r;
}

}  // namespace

TestResult check_cuda_arch(const CudaBinaries& binaries, const std::vector<std::string>& arch,
                           const std::vector<std::string>& ignore) {
  TestResult r{"static: CUDA code for every requested arch", "static", Outcome::Passed, "", {}, 0};
  std::vector<int> want;
  for (const auto& a : arch)
    want.push_back(sm_number(a.substr(0, a.find('+'))));  // "9.0+PTX" -> 90
  if (want.empty()) {
    r.outcome = Outcome::Skipped;
    r.message = "no compute capabilities were requested";
    return r;
  }
  return arch_check(binaries, want, ignore, r, "every requested arch");
}

TestResult check_cuda_arch(const ImageRoot& root, const std::vector<std::string>& arch,
                           const std::vector<std::string>& ignore) {
  auto start = std::chrono::steady_clock::now();
  if (arch.empty()) return check_cuda_arch(CudaBinaries{}, arch, ignore);
  TestResult r = check_cuda_arch(cuda_binaries(root), arch, ignore);
  r.seconds = seconds_since(start);
  return r;
}

TestResult check_gpu_code(const CudaBinaries& binaries, const std::string& arch,
                          const std::string& gpus, const std::vector<std::string>& ignore) {
  const int sm = sm_number(arch);
  const std::string name = "sm_" + std::to_string(sm);
  TestResult r{"gpu: CUDA code for " + name + " (" + gpus + ")", "gpu", Outcome::Passed, "", {}, 0};
  return arch_check(binaries, {sm}, ignore, r, name + ", the GPU here");
}

}  // namespace sb::verify

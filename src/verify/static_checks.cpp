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
  // The canonical image path `image_path` leads to (its symlinks followed).
  auto canonical = [&](const std::string& image_path) {
    return root.image_path(*root.resolve(image_path));
  };
  // Each object's own search, as ld.so's: DT_RPATH when there is no
  // DT_RUNPATH, LD_LIBRARY_PATH, DT_RUNPATH, then the linker cache's dirs.
  // What it cannot find there is looked for again below, in its loaders' DT_RPATH.
  struct Object {
    std::string self;
    const ElfInfo* info;
  };
  const auto files = elf_files(root);
  std::vector<Object> objects;
  // A library's canonical image path -> the objects that need it.
  std::map<std::string, std::set<size_t>> loaded_by;
  std::vector<std::pair<size_t, std::string>> unresolved;  // object, need
  for (const auto& [file, info] : files) {
    if (!info.dynamic) continue;
    const size_t index = objects.size();
    objects.push_back({root.image_path(file), &info});
    const std::string& self = objects.back().self;
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
      std::string found;
      if (need.find('/') != std::string::npos) {
        std::string p = need[0] == '/' ? need : origin + "/" + need;
        if (loadable(p, info)) found = p;
      } else {
        for (const auto& d : dirs)
          if (loadable(d + "/" + need, info)) {
            found = d + "/" + need;
            break;
          }
      }
      if (found.empty())
        unresolved.emplace_back(index, need);
      else
        loaded_by[canonical(found)].insert(index);
    }
  }
  // An object without DT_RUNPATH also searches the DT_RPATH of the objects
  // that load it, and of theirs, up to the program (ld.so's loader chain; an
  // object with DT_RUNPATH lends none): auditwheel's libgfortran, with no
  // path of its own, finds its libquadmath through the scipy module's RPATH.
  // Found that way, a library is loaded by the object too, which lends the
  // DT_RPATH above it to what the library needs: again until nothing changes.
  auto through_loaders = [&](size_t index, const std::string& need) -> std::string {
    const Object& obj = objects[index];
    if (!obj.info->runpath.empty() || need.find('/') != std::string::npos) return "";
    std::set<size_t> seen{index};
    std::vector<size_t> todo{index};
    while (!todo.empty()) {
      size_t at = todo.back();
      todo.pop_back();
      auto it = loaded_by.find(objects[at].self);
      if (it == loaded_by.end()) continue;
      for (size_t loader : it->second) {
        if (!seen.insert(loader).second) continue;
        todo.push_back(loader);
        const ElfInfo& li = *objects[loader].info;
        if (!li.runpath.empty()) continue;
        std::string origin = fs::path(objects[loader].self).parent_path().string();
        for (const auto& d : li.rpath)
          if (std::string p = expand_origin(d, origin) + "/" + need; loadable(p, *obj.info))
            return p;
      }
    }
    return "";
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = unresolved.begin(); it != unresolved.end();) {
      if (std::string found = through_loaders(it->first, it->second); !found.empty()) {
        loaded_by[canonical(found)].insert(it->first);
        it = unresolved.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  // Where the image has the library after all, only where the loader does not
  // look from this object (an aarch64 wheel's library without the RUNPATH its
  // x86_64 build has): said, so the fix (a RUNPATH, LD_LIBRARY_PATH) is plain.
  std::map<std::string, std::vector<size_t>> by_name;
  for (size_t i = 0; i < objects.size(); ++i) by_name[fs::path(objects[i].self).filename().string()].push_back(i);
  for (const auto& [index, need] : unresolved) {
    std::string elsewhere;
    if (auto it = by_name.find(need); it != by_name.end())
      for (size_t i : it->second)
        if (loadable(objects[i].self, *objects[index].info)) {
          elsewhere = objects[i].self;
          break;
        }
    findings.add(objects[index].self,
                 elsewhere.empty() ? "needs " + need + ", which is not in the image"
                                   : "needs " + need + ", which the image has at " + elsewhere +
                                         ", outside this file's search path (its RUNPATH, LD_LIBRARY_PATH, the "
                                         "linker cache)");
  }
  r.seconds = seconds_since(start);
  if (findings.failures()) {
    r.outcome = Outcome::Failed;
    r.message = counted(findings.failures(), "unresolved library", "unresolved libraries") +
                " in " + counted(objects.size(), "dynamic ELF file", "dynamic ELF files");
  } else {
    r.message = counted(objects.size(), "dynamic ELF file", "dynamic ELF files") + " checked";
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

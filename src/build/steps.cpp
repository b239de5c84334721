#include "build/steps.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "util/file.hpp"

namespace sb {

namespace {

constexpr size_t kTailLines = 20;

// Output of the steps: to the log as it comes, to Status line by line under
// the layer's name, and the last lines kept for an error message.
class OutputSink {
 public:
  OutputSink(std::string layer, const fs::path& log, Status& status)
      : layer_(std::move(layer)), status_(status) {
    fs::create_directories(log.parent_path());
    fd_.reset(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd_.get() < 0) throw_errno("open " + log.string());
  }

  void note(const std::string& line) { put(line + "\n"); }

  void put(std::string_view data) {
    write_all(fd_.get(), data.data(), data.size(), "the build log");
    partial_.append(data);
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      line(partial_.substr(start, nl - start));
    partial_.erase(0, start);
    if (partial_.size() > 64 * 1024) {  // a very long line: show it in pieces
      line(partial_);
      partial_.clear();
    }
  }

  void flush() {
    if (!partial_.empty()) line(partial_);
    partial_.clear();
  }

  std::string tail() const {
    std::string s;
    for (const auto& l : tail_) s += "\n    " + l;
    return s;
  }

 private:
  void line(std::string l) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    status_.message(Level::Info, layer_ + " | " + l);
    tail_.push_back(std::move(l));
    if (tail_.size() > kTailLines) tail_.pop_front();
  }

  std::string layer_;
  Status& status_;
  UniqueFd fd_;
  std::string partial_;
  std::deque<std::string> tail_;
};

std::string describe_command(const std::vector<std::string>& argv) {
  if (argv.size() == 3 && argv[0] == "/bin/sh" && argv[1] == "-c") return argv[2];
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string shorten(const std::string& s, size_t max = 60) {
  std::string one = s.substr(0, s.find('\n'));
  return one.size() > max || one.size() < s.size() ? one.substr(0, max) + "..." : one;
}

// Moves the prepared source tree to `source_at` under `top` (the upper
// directory, or the root copy). The path must be new in the layers below and
// its parents directories there (never symlinks, which could lead outside);
// parents made in the upper directory copy the lower ones' mode and owner.
void place_source(const StepsInput& in, const fs::path& top) {
  std::string rel = in.source_at.substr(std::min(in.source_at.find_first_not_of('/'), in.source_at.size()));
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  if (rel.empty()) throw Error("layer '" + in.layer + "': keep_source cannot be the image root");
  fs::path sub;
  for (const auto& part : fs::path(rel)) {
    if (part == ".." || part == "." || part.empty())
      throw Error("layer '" + in.layer + "': keep_source '" + in.source_at + "' is not a plain absolute path");
    sub /= part;
    const bool leaf = sub == fs::path(rel);
    struct stat st;
    if (::lstat((in.lower / sub).c_str(), &st) == 0) {
      if (leaf)
        throw Error("layer '" + in.layer + "': keep_source " + in.source_at +
                    " already exists in the layers below; keep the source at a new path");
      if (!S_ISDIR(st.st_mode))
        throw Error("layer '" + in.layer + "': keep_source " + in.source_at + ": /" + sub.string() +
                    " is not a directory in the layers below" + (S_ISLNK(st.st_mode) ? " (a symlink)" : ""));
    }
    if (leaf) break;
    fs::path made = top / sub;
    if (::lstat(made.c_str(), &st) == 0) continue;
    fs::create_directory(made);
    struct stat below;
    bool has = ::lstat((in.lower / sub).c_str(), &below) == 0;
    ::chmod(made.c_str(), has ? (below.st_mode & 07777) : 0755);
    if (has && ::geteuid() == 0) (void)!::lchown(made.c_str(), below.st_uid, below.st_gid);
  }
  fs::path dest = top / rel;
  std::error_code ec;
  fs::rename(in.source, dest, ec);
  if (ec) {  // another filesystem: copy
    fs::create_directory(dest);
    copy_tree(in.source, dest);
  }
  ::chmod(dest.c_str(), 0755);
  // A step running as another user builds in the tree: it is theirs.
  const uint32_t uid = in.spec.uid.value_or(0), gid = in.spec.gid.value_or(uid);
  if ((uid != 0 || gid != 0) && ::geteuid() == 0) {
    (void)!::lchown(dest.c_str(), uid, gid);
    for (const auto& e : fs::recursive_directory_iterator(dest)) (void)!::lchown(e.path().c_str(), uid, gid);
  }
}

}  // namespace

std::string cmake_cuda_architectures(const std::string& list) {
  std::string out;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(';', start);
    if (end == std::string::npos) end = list.size();
    std::string cc = list.substr(start, end - start);
    start = end + 1;
    bool ptx = cc.ends_with("+PTX");
    if (ptx) cc.resize(cc.size() - 4);
    std::string digits;
    for (char c : cc)
      if (c != '.') digits += c;
    if (digits.empty()) continue;
    out += (out.empty() ? "" : ";") + digits + (ptx ? "" : "-real");
  }
  return out;
}

std::string cache_dir_name(const std::string& path) {
  std::string out;
  for (char c :
       path.substr(path.find_first_not_of('/') == std::string::npos ? path.size()
                                                                    : path.find_first_not_of('/')))
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out.empty() ? "_" : out;
}

std::map<std::string, std::string> step_environment(
    const Recipe& recipe, const BuildSpec& spec,
    const std::map<std::string, std::string>& variables, int64_t epoch,
    const std::map<std::string, std::string>& library_paths) {
  std::map<std::string, std::string> env{
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", spec.uid.value_or(0) == 0 ? "/root" : "/"},
      {"SOURCE_DATE_EPOCH", std::to_string(epoch)},
  };
  for (const auto& [k, v] : recipe.config.env) env[k] = v.value;
  for (const auto& [name, value] : variables) {
    std::string key = "SB_";
    for (char c : name)
      key += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
    env[key] = value;
    if (name == "arch") {
      env["TORCH_CUDA_ARCH_LIST"] = value;
      env["CMAKE_CUDA_ARCHITECTURES"] = cmake_cuda_architectures(value);
    } else if (name == "cuda") {
      env["CUDA_HOME"] = "/usr/local/cuda";
      env["CUDA_VERSION"] = value;
    } else if (name == "cudnn" || name == "nccl") {
      env[key.substr(3) + "_VERSION"] = value;
    }
  }
  for (const auto& [k, v] : library_paths) env[k] = v;
  for (const auto& [k, v] : spec.env) env[k] = v.value;
  return env;
}

Changeset run_build_steps(const StepsInput& in, sandbox::Sandbox& sandbox, Status& status) {
  const fs::path upper = in.scratch / "upper", work = in.scratch / "work",
                 root = in.scratch / "rootfs";
  fs::create_directories(in.overlay ? upper : root);
  if (in.overlay)
    fs::create_directories(work);
  else
    copy_tree(in.lower, root);
  // The image's setuid, setgid and capability bits, off the cached root's
  // disk, are back in the steps' own view.
  restore_privileged(in.privileged, in.overlay ? upper : root, in.overlay ? in.lower : fs::path());

  if (!in.source.empty() && in.keep_source) place_source(in, in.overlay ? upper : root);

  sandbox::SandboxSpec s;
  if (in.overlay) {
    s.lower = {in.lower};
    s.upper = upper;
    s.work = work;
  } else {
    s.root = root;
  }
  s.scratch = in.scratch / "sandbox";
  s.architecture = in.architecture;
  s.env = in.env;
  s.cwd = !in.spec.workdir.empty() ? in.spec.workdir : !in.source.empty() ? in.source_at : "/";
  s.uid = in.spec.uid.value_or(0);
  s.gid = in.spec.gid.value_or(s.uid);
  s.network = in.spec.network;
  s.timeout_seconds = in.spec.timeout;
  for (const auto& path : in.spec.cache) {
    fs::path dir = in.cache_root / cache_dir_name(path);
    if (fs::create_directories(dir) && ::geteuid() == 0) (void)!::chown(dir.c_str(), s.uid, s.gid);
    ::utimensat(AT_FDCWD, dir.c_str(), nullptr, 0);  // used now: `stackbuild gc` evicts the least recent
    s.mounts.push_back({dir, path, false});
  }

  if (!in.source.empty() && !in.keep_source) s.mounts.push_back({in.source, in.source_at, false});

  OutputSink out(in.layer, in.log, status);
  const auto commands = in.spec.commands();
  for (size_t i = 0; i < commands.size(); ++i) {
    s.argv = commands[i];
    std::string step = "step " + std::to_string(i + 1) + " of " + std::to_string(commands.size()) +
                       " ('" + shorten(describe_command(commands[i])) + "')";
    out.note("# " + in.layer + ": " + step);
    sandbox::SandboxResult r;
    try {
      r = sandbox.run(s, [&](std::string_view data) { out.put(data); });
    } catch (Error& e) {
      e.add_trace("while running " + step + " of layer '" + in.layer + "'");
      throw;
    }
    out.flush();
    if (r.exit_status == 0 && !r.timed_out) continue;
    std::string what =
        r.timed_out ? "timed out after " + std::to_string(in.spec.timeout) + "s (build.timeout)"
                    : "exited with status " + std::to_string(r.exit_status);
    out.note("# " + what);
    throw BuildError("layer '" + in.layer + "': " + step + " " + what +
                         "\n  log: " + in.log.string() + "\n  last lines:" + out.tail(),
                     r.exit_status, in.log);
  }
  std::error_code
      ec;  // overlayfs leaves work/work mode 000: let the scratch directory's removal in
  fs::permissions(work / "work", fs::perms::owner_all, fs::perm_options::add, ec);
  return in.overlay ? changeset_from_upper(upper, in.lower, in.privileged)
                    : changeset_from_copy(root, in.lower, in.privileged);
}

}  // namespace sb

#include "verify/image_root.hpp"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace sb::verify {

std::optional<std::vector<std::string>> ImageRoot::walk(const std::string& p,
                                                        bool missing_ok) const {
  std::vector<std::string> todo;  // a stack of components, next at the back
  auto push_path = [&](const std::string& s) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find('/', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) parts.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
  };
  push_path(p);
  std::vector<std::string> real;
  size_t missing_from = std::string::npos;  // real[i] for i >= this does not exist
  int hops = 0;
  while (!todo.empty()) {
    std::string c = todo.back();
    todo.pop_back();
    if (c == ".") continue;
    if (c == "..") {
      if (!real.empty()) real.pop_back();
      if (missing_from != std::string::npos && real.size() <= missing_from)
        missing_from = std::string::npos;
      continue;
    }
    if (missing_from != std::string::npos) {  // under a missing directory: nothing to look at
      real.push_back(c);
      continue;
    }
    fs::path host = root_;
    for (const auto& r : real) host /= r;
    host /= c;
    std::error_code ec;
    auto st = fs::symlink_status(host, ec);
    if (ec || !fs::exists(st)) {
      if (!missing_ok) return std::nullopt;
      missing_from = real.size();
      real.push_back(c);
      continue;
    }
    if (fs::is_symlink(st)) {
      std::string target = fs::read_symlink(host, ec).string();
      if (ec || ++hops > 40) {
        if (!missing_ok) return std::nullopt;
        missing_from =
            real.size();  // a loop or an unreadable link: the link itself, not through it
        real.push_back(c);
        continue;
      }
      if (!target.empty() && target[0] == '/') real.clear();
      push_path(target);
      continue;
    }
    real.push_back(c);
  }
  return real;
}

std::optional<fs::path> ImageRoot::resolve(const std::string& p) const {
  auto real = walk(p, false);
  if (!real) return std::nullopt;
  fs::path out = root_;
  for (const auto& r : *real) out /= r;
  return out;
}

std::string ImageRoot::mount_path(const std::string& p) const {
  const std::vector<std::string> real = *walk(p, true);  // never nullopt with missing_ok
  std::string out;
  for (const auto& r : real) out += "/" + r;
  return out.empty() ? "/" : out;
}

std::string ImageRoot::image_path(const fs::path& host) const {
  std::string rel = host.lexically_relative(root_).string();
  return rel == "." ? "/" : "/" + rel;
}

static void read_ld_conf(const ImageRoot& root, const std::string& file, std::vector<std::string>& out,
                         std::set<std::string>& seen, int depth) {
  auto host = root.resolve(file);
  if (!host || depth > 8 || !seen.insert(host->string()).second) return;
  std::ifstream in(*host);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    if (line.rfind("include", 0) == 0) {
      std::string pattern = line.substr(7);
      pattern.erase(0, pattern.find_first_not_of(" \t"));
      if (pattern.empty()) continue;
      if (pattern[0] != '/') pattern = fs::path(file).parent_path().string() + "/" + pattern;
      glob_t g{};
      if (::glob((root.root().string() + pattern).c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) read_ld_conf(root, root.image_path(g.gl_pathv[i]), out, seen, depth + 1);
      }
      globfree(&g);
    } else if (line[0] == '/') {
      out.push_back(line);
    }
  }
}

std::vector<std::string> ImageRoot::linker_dirs() const {
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  read_ld_conf(*this, "/etc/ld.so.conf", dirs, seen, 0);
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"})
    dirs.push_back(d);
  return dirs;
}

bool ImageRoot::debian_family() const {
  return resolve("/etc/debian_version").has_value();
}

std::vector<std::string> ImageRoot::ldconfig_dirs(const std::string& tuple) const {
  std::vector<std::string> conf;
  std::set<std::string> seen;
  read_ld_conf(*this, "/etc/ld.so.conf", conf, seen, 0);
  if (debian_family()) {
    for (const std::string& d :
         {"/lib/" + tuple, "/usr/lib/" + tuple, std::string("/lib"), std::string("/usr/lib")})
      conf.push_back(d);
  } else {
    conf.insert(conf.end(), {"/lib64", "/usr/lib64"});
  }
  std::vector<std::string> out;
  for (const auto& d : conf)
    if (std::string p = mount_path(d); std::find(out.begin(), out.end(), p) == out.end())
      out.push_back(p);
  return out;
}

}  // namespace sb::verify

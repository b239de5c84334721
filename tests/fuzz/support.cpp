#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "fuzz.hpp"

namespace sb::fuzz {

namespace fs = std::filesystem;

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: property broken: %s\n", what.c_str());
  std::abort();
}

std::vector<std::string> split(std::string_view input, size_t n) {
  std::vector<std::string> parts;
  while (parts.size() + 1 < n) {
    size_t at = input.find("\n----\n");
    if (at == std::string_view::npos) break;
    parts.emplace_back(input.substr(0, at + 1));
    input.remove_prefix(at + 6);
  }
  parts.emplace_back(input);
  parts.resize(n);
  return parts;
}

const fs::path& fresh_scratch() {
  static const fs::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    fs::path base = tmp && *tmp ? tmp : "/tmp";
    std::string pattern = (base / "sb-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    // Removed at exit, whether the run ends well or by a finding (abort
    // skips this; the directory's name says what it was).
    static struct Remover {
      fs::path p;
      ~Remover() {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    } remover{pattern};
    return fs::path(pattern);
  }();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir)) {
    // A target may leave entries it made read-only or unsearchable.
    for (auto it = fs::recursive_directory_iterator(e.path(), fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    if (e.is_directory(ec) && !e.is_symlink(ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(e.path(), ec);
  }
  return dir;
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

namespace {
std::map<std::string, Target>& targets() {
  static std::map<std::string, Target> m;
  return m;
}
}  // namespace

bool register_target(const char* name, Target target) {
  targets()[name] = target;
  return true;
}

Target find_target(const std::string& name) {
  auto it = targets().find(name);
  return it == targets().end() ? nullptr : it->second;
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const auto& [name, t] : targets()) names.push_back(name);
  return names;
}

}  // namespace sb::fuzz

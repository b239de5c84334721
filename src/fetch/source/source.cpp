#include "fetch/source/source.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "archive/entry.hpp"
#include "archive/extract.hpp"
#include "archive/libarchive.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"
#include "util/resources.hpp"

namespace sb::source {

namespace {

std::string run(const std::vector<std::string>& argv, const fs::path& cwd, const std::string& what) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.env = current_environment();
  spec.env["GIT_TERMINAL_PROMPT"] = "0";
  spec.cwd = cwd;
  spec.capture_stdout = true;
  spec.merge_stderr = true;
  ProcessResult r = run_process(spec);
  if (r.exit_status != 0) {
    std::string out = r.output.size() > 2000 ? "..." + r.output.substr(r.output.size() - 2000) : r.output;
    throw Error(what + " failed (exit status " + std::to_string(r.exit_status) + "):\n" + out);
  }
  return r.output;
}

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

}  // namespace

std::string git_url_problem(const std::string& url) {
  if (url.empty()) return "is empty";
  if (url[0] == '-') return "begins with '-', which git would read as an option";
  if (has_control(url)) return "holds a control character";
  size_t scheme_end = url.find("://");
  size_t colon = url.find(':');
  size_t slash = url.find('/');
  // git's <transport>::<address>: runs git-remote-<transport> (ext:: runs any command).
  if (colon != std::string::npos && url.compare(colon, 2, "::") == 0 && (slash == std::string::npos || colon < slash))
    return "uses git's transport-helper syntax ('" + url.substr(0, colon) + "::'), which stackbuild does not allow";
  if (scheme_end != std::string::npos && (slash == std::string::npos || scheme_end < slash)) {
    std::string scheme = url.substr(0, scheme_end);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), ::tolower);
    static const std::set<std::string> allowed = {"https", "http", "ssh", "git+ssh", "ssh+git", "git", "file"};
    if (!allowed.count(scheme))
      return "uses the scheme '" + scheme + "://' (git sources are https, http, ssh, git or file URLs)";
    if (scheme == "file") return "";
    std::string authority = url.substr(scheme_end + 3);
    authority = authority.substr(0, authority.find('/'));
    std::string host = authority.substr(authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@') + 1);
    if (host.empty()) return "names no host";
    if (host[0] == '-' || authority[0] == '-')
      return "has a host or user beginning with '-', which ssh would read as an option";
    return "";
  }
  // scp-like [user@]host:path: a colon before any slash.
  if (colon != std::string::npos && (slash == std::string::npos || colon < slash) && colon > 0) {
    std::string userhost = url.substr(0, colon);
    std::string host = userhost.substr(userhost.rfind('@') == std::string::npos ? 0 : userhost.rfind('@') + 1);
    if (host.empty() || host[0] == '-') return "has a host beginning with '-', which ssh would read as an option";
    return "";
  }
  return "is a local path; a local mirror is named explicitly as a file:// URL (file:///srv/mirror/repo)";
}

std::string git_ref_problem(const std::string& ref) {
  if (ref.empty()) return "is empty";
  if (ref[0] == '-') return "begins with '-', which git would read as an option";
  if (has_control(ref)) return "holds a control character";
  for (char c : std::string(" ~^:?*[\\"))
    if (ref.find(c) != std::string::npos) return std::string("holds '") + c + "', which no git ref name holds";
  if (ref.find("..") != std::string::npos || ref.find("@{") != std::string::npos)
    return "holds '..' or '@{', which no git ref name holds";
  return "";
}

void to_json(nlohmann::json& j, const SourceLock& l) {
  j = {{"kind", l.kind}, {"tree", l.tree.str()}};
  if (!l.url.empty()) j["url"] = l.url;
  if (l.sha256) j["sha256"] = l.sha256->hex();
  if (!l.commit.empty()) j["commit"] = l.commit;
  if (!l.path.empty()) j["path"] = l.path;
  if (l.debian) j["debian"] = *l.debian;
  nlohmann::json p = nlohmann::json::array();
  for (const auto& pl : l.patches) p.push_back({{"path", pl.path}, {"sha256", pl.sha256.hex()}});
  if (!l.patches.empty()) j["patches"] = p;
}

Digest tree_digest(const fs::path& dir) {
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename() == ".git" && it->is_directory()) {
      it.disable_recursion_pending();
      continue;
    }
    paths.push_back(it->path().lexically_relative(dir));
  }
  std::sort(paths.begin(), paths.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  std::vector<struct stat> stats(paths.size());
  std::vector<fs::path> files;  // the regular files' contents, hashed on every core
  for (size_t i = 0; i < paths.size(); ++i) {
    fs::path p = dir / paths[i];
    if (::lstat(p.c_str(), &stats[i]) != 0) throw_errno("stat " + p.string());
    if (!S_ISLNK(stats[i].st_mode) && !S_ISDIR(stats[i].st_mode)) files.push_back(p);
  }
  // Not following links: each was a regular file when lstat() saw it, and a
  // link swapped in since must not make the key hash a file outside the tree.
  const std::vector<Digest> contents = Digest::of_files(files, usable_cores(), /*follow_links=*/false);
  size_t next = 0;
  KeyHasher k;
  for (size_t i = 0; i < paths.size(); ++i) {
    const struct stat& st = stats[i];
    k.field("path", paths[i].string());
    if (S_ISLNK(st.st_mode)) k.field("symlink", fs::read_symlink(dir / paths[i]).string());
    else if (S_ISDIR(st.st_mode)) k.field("dir", "");
    else k.field("file", (st.st_mode & 0111) ? "x" : "-").field("sha256", contents[next++].hex());
  }
  return k.finish();
}

SourceLock prepare_source(const SourceSpec& spec, const fs::path& dest, const Store& store, fetch::Fetcher& fetcher) {
  SourceLock lock{"", "", std::nullopt, "", "", std::nullopt, {}, Digest::of_bytes("")};
  fs::create_directories(dest);
  switch (spec.kind) {
    case SourceSpec::Kind::Archive: {
      if (!spec.sha256 && !spec.allow_unpinned)
        throw Error("archive source " + spec.url + " has no sha256; pin it (stackbuild lock records it)");
      std::string label = spec.url.substr(spec.url.rfind('/') + 1);
      auto got = fetcher.fetch_one({spec.url, spec.sha256, std::nullopt, label});
      ArchiveOptions unpacking;  // the safe extractor: nothing written, read or chmod-ed through a link
      unpacking.label = label;
      unpacking.strip_single_top = true;
      extract_archive(store.blob_path(got.digest), dest, unpacking);
      lock.kind = "archive";
      lock.url = spec.url;
      lock.sha256 = got.digest;
      break;
    }
    case SourceSpec::Kind::Git: {
      if (spec.ref.empty()) throw Error("git source " + spec.url + " needs a commit or a tag");
      if (std::string why = git_url_problem(spec.url); !why.empty())
        throw Error("git source URL '" + spec.url + "' " + why);
      if (std::string why = git_ref_problem(spec.ref); !why.empty())
        throw Error("git source " + spec.url + ": ref '" + spec.ref + "' " + why);
      // "--" ends git's options wherever it takes one: what follows is data.
      run({"git", "init", "-q", "--", dest.string()}, {}, "git init");
      run({"git", "-C", dest.string(), "-c", "protocol.ext.allow=never", "fetch", "-q", "--depth", "1", "--", spec.url,
           spec.ref},
          {}, "git fetch " + spec.url + " " + spec.ref);
      run({"git", "-C", dest.string(), "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD", "--"}, {},
          "git checkout " + spec.ref);
      if (fs::exists(dest / ".gitmodules"))  // the commits the tree pins, shallow (PyTorch needs them)
        run({"git", "-C", dest.string(), "-c", "protocol.ext.allow=never", "submodule", "update", "--init",
             "--recursive", "--depth", "1", "--jobs", "8", "--"},
            {}, "git submodule update");
      std::string head = run({"git", "-C", dest.string(), "rev-parse", "HEAD"}, {}, "git rev-parse");
      head = head.substr(0, head.find_first_of("\r\n"));
      bool is_commit = spec.ref.size() == 40 && std::all_of(spec.ref.begin(), spec.ref.end(), ::isxdigit);
      if (is_commit && head != spec.ref) throw Error("git source " + spec.url + ": asked " + spec.ref + ", got " + head);
      lock.kind = "git";
      lock.url = spec.url;
      lock.commit = head;
      break;
    }
    case SourceSpec::Kind::Debian: {
      lock.kind = "debian";
      lock.debian = prepare_debian_source(spec.debian, dest, store, fetcher);
      break;
    }
    case SourceSpec::Kind::Local: {
      if (!fs::is_directory(spec.path)) throw Error("local source " + spec.path.string() + " is not a directory");
      fs::copy(spec.path, dest, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
      lock.kind = "local";
      lock.path = spec.path.string();
      break;
    }
  }
  for (const auto& p : spec.patches) {
    if (!fs::is_regular_file(p)) throw Error("patch " + p.string() + " does not exist");
    fs::path abs = fs::absolute(p);
    if (spec.kind == SourceSpec::Kind::Git)
      run({"git", "-C", dest.string(), "apply", "--whitespace=nowarn", "--", abs.string()}, {},
          "git apply " + p.string());
    else
      run({"patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-i", abs.string()}, dest,
          "patch -p1 < " + p.string());
    lock.patches.push_back({p.string(), Digest::of_file(p)});
  }
  if (spec.kind == SourceSpec::Kind::Git) {  // packs are not reproducible; submodules have .git files
    std::vector<fs::path> dot_git;
    for (auto it = fs::recursive_directory_iterator(dest); it != fs::recursive_directory_iterator(); ++it)
      if (it->path().filename() == ".git") {
        dot_git.push_back(it->path());
        it.disable_recursion_pending();
      }
    for (const auto& p : dot_git) fs::remove_all(p);
  }
  lock.tree = tree_digest(dest);
  return lock;
}

}  // namespace sb::source

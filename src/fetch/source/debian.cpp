#include "fetch/source/debian.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "archive/entry.hpp"
#include "archive/extract.hpp"
#include "fetch/apt/control.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/apt/version.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/text.hpp"
#include "util/limits.hpp"
#include "util/number.hpp"
#include "util/process.hpp"

namespace sb::source {

namespace {

// A file name a .dsc or Sources may give: one plain name, nothing a path
// could make of it.
bool plain_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n[0] != '-' && n.find('/') == std::string::npos &&
         std::none_of(n.begin(), n.end(), [](char c) { return static_cast<unsigned char>(c) < 0x21 || c == 0x7f; });
}

// "sha256 size name" lines (Checksums-Sha256), in order.
std::vector<DebianFile> parse_checksums(const std::string& field, const std::string& what) {
  std::vector<DebianFile> out;
  size_t pos = 0;
  while (pos < field.size()) {
    size_t end = field.find('\n', pos);
    if (end == std::string::npos) end = field.size();
    auto words = apt::split_words(std::string_view(field).substr(pos, end - pos));
    pos = end + 1;
    if (words.empty()) continue;
    auto size = words.size() == 3 ? parse_integer<uint64_t>(words[1]) : std::nullopt;
    bool hex = words.size() == 3 && words[0].size() == 64 &&
               words[0].find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!size || !hex) throw Error(what + ": a Checksums-Sha256 line that is not 'SHA256 SIZE NAME'");
    if (!plain_name(words[2])) throw Error(what + ": a file name that is not a plain name: '" + words[2] + "'");
    out.push_back({words[2], Digest::parse("sha256:" + words[0]), *size});
  }
  if (out.empty()) throw Error(what + " lists no Checksums-Sha256 (only SHA256 is trusted)");
  return out;
}

std::string without_epoch(const std::string& v) {
  size_t c = v.find(':');
  return c == std::string::npos ? v : v.substr(c + 1);
}

std::string upstream_of(const std::string& v) {
  std::string s = without_epoch(v);
  size_t dash = s.rfind('-');
  return dash == std::string::npos ? s : s.substr(0, dash);
}

// The machine's repositories of `suite`: those it names for that suite, and
// those of its own release (or of the same -updates/-security) renamed.
// Repositories taken on trust are left out: nothing checks what they serve.
std::vector<apt::Repository> suite_repositories(const fs::path& root, const std::string& suite,
                                                std::vector<std::string>& notes) {
  const std::string mine = apt::machine_codename(root);
  const size_t dash = suite.find('-');
  const std::string suffix = dash == std::string::npos ? "" : suite.substr(dash);
  std::vector<apt::Repository> exact, renamed, base;
  for (const auto& r : apt::machine_repositories(root)) {
    if (r.trusted) {
      notes.push_back(r.id() + ": taken on trust (trusted), not asked");
      continue;
    }
    apt::Repository c = r;
    if (r.suite == suite) {
      exact.push_back(c);
      continue;
    }
    if (mine.empty() || (r.suite != mine && !r.suite.starts_with(mine + "-"))) continue;
    c.suite = suite;
    // A keyring named for the machine's release does not sign another's.
    if (c.signed_by.filename().string().find(mine) != std::string::npos) c.signed_by.clear();
    if (r.suite.substr(mine.size()) == suffix) renamed.push_back(c);
    else if (r.suite == mine) base.push_back(c);
  }
  std::vector<apt::Repository> out = exact;
  auto add = [&](const std::vector<apt::Repository>& list) {
    for (const auto& r : list)
      if (std::none_of(out.begin(), out.end(), [&](const apt::Repository& o) { return o.uri == r.uri; }))
        out.push_back(r);
  };
  add(renamed);
  if (out.empty() && suffix != "-security") add(base);  // -backports: the release's archive
  return out;
}

fs::path keyring_of(const apt::Repository& r, const fs::path& root) {
  return r.signed_by.empty() ? root / "usr/share/keyrings/debian-archive-keyring.gpg" : r.signed_by;
}

time_t parse_date(const std::string& s) {
  struct tm tm {};
  if (!strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm)) return 0;
  return timegm(&tm);
}

// The decompressed Sources index of `r`'s suite (component main), read
// through its InRelease checked with gpgv. Throws naming the repository.
std::string read_sources_index(const apt::Repository& r, const fs::path& root, const Store& store,
                               fetch::Fetcher& fetcher) {
  const std::string base = r.uri + "/dists/" + r.suite + "/";
  const fs::path keyring = keyring_of(r, root);
  fetch::FetchItem rel{base + "InRelease", std::nullopt, std::nullopt, "InRelease of " + r.suite};
  rel.max_size = limits::apt_release();
  std::optional<std::string> checked;
  rel.check = [&](const fs::path& f) { checked = apt::verify_inrelease(f, keyring, rel.url); };
  fetch::Fetched got = fetcher.fetch_one(rel);
  std::string text = checked ? *checked : apt::verify_inrelease(store.blob_path(got.digest), keyring, rel.url);
  apt::ReleaseFile release = apt::parse_release(text);
  if (release.suite != r.suite && release.codename != r.suite)
    throw Error(rel.url + " is for suite '" + release.suite + "' (codename '" + release.codename + "'), not '" +
                r.suite + "'");
  if (r.check_valid_until && !release.valid_until.empty()) {
    time_t until = parse_date(release.valid_until);
    if (until && until < std::time(nullptr))
      throw Error(rel.url + " expired on " + release.valid_until + " (a replayed or stale mirror?)");
  }
  std::string path;
  apt::IndexFile file;
  for (const char* suffix : {".xz", ".gz", ""}) {
    auto it = release.files.find("main/source/Sources" + std::string(suffix));
    if (it != release.files.end()) {
      path = it->first;
      file = it->second;
      break;
    }
  }
  if (path.empty()) throw Error(rel.url + " lists no main/source/Sources{.xz,.gz,}: the suite has no source packages");
  if (file.size > limits::apt_index().bytes)
    throw Error(rel.url + " lists " + path + " at " + std::to_string(file.size) + " bytes, over " +
                limits::apt_index().describe());
  std::string url = release.acquire_by_hash ? base + "main/source/by-hash/SHA256/" + file.sha256 : base + path;
  fetch::Fetched index = fetcher.fetch_one({url, Digest::parse("sha256:" + file.sha256), file.size, r.suite + "/" + path});
  Digest key = KeyHasher().field("debian-sources-plain", index.digest.str()).finish();
  if (auto rec = store.get_record("apt-index", key); rec && store.has(Digest::parse(*rec)))
    return store.read(Digest::parse(*rec));
  std::string plain = apt::decompress(store.read(index.digest), path);
  store.put_record("apt-index", key, store.put(plain).str());
  return plain;
}

// The paragraph of `name` at `version` ("" = the newest) in a Sources index.
std::optional<apt::Paragraph> find_paragraph(const std::string& index, const std::string& name,
                                             const std::string& version, std::vector<std::string>& seen) {
  std::optional<apt::Paragraph> best;
  apt::for_each_paragraph(index, [&](const apt::Paragraph& p) {
    if (p.get("Package") != name) return;
    seen.push_back(p.get("Version"));
    if (!version.empty() ? p.get("Version") != version
                         : p.get("Extra-Source-Only") == "yes" ||
                               (best && apt::compare_versions(p.get("Version"), best->get("Version")) <= 0))
      return;
    best = p;
  });
  return best;
}

// The source package as the paragraph says: its .dsc and the files beside it.
DebianSource from_paragraph(const apt::Paragraph& p, const std::string& suite, const std::string& where) {
  DebianSource s;
  s.name = p.get("Package");
  s.version = p.get("Version");
  s.suite = suite;
  s.format = p.get("Format");
  s.directory = p.get("Directory");
  if (s.directory.empty() || canonical_archive_path(s.directory) != s.directory)
    throw Error(where + ": " + s.name + " " + s.version + " has Directory '" + s.directory +
                "', not a path in the repository");
  const std::string dsc = s.name + "_" + without_epoch(s.version) + ".dsc";
  bool have_dsc = false;
  for (auto& f : parse_checksums(p.get("Checksums-Sha256"), where + ": " + s.name + " " + s.version)) {
    if (f.name == dsc) s.dsc = f, have_dsc = true;
    else s.files.push_back(f);
  }
  if (!have_dsc) throw Error(where + ": " + s.name + " " + s.version + " lists no " + dsc);
  return s;
}

// Fetches every file of `s` from repository `uri` by its sha256 and size.
void fetch_files(const DebianSource& s, const std::string& uri, fetch::Fetcher& fetcher) {
  std::vector<fetch::FetchItem> items;
  for (const auto& f : s.files)
    items.push_back({uri + "/" + s.directory + "/" + f.name, f.sha256, f.size, f.name});
  fetcher.fetch(items);
}

// Whether `p` (below `root`) or a directory on the way there is a symlink.
bool through_link(const fs::path& root, const std::string& rel) {
  fs::path at = root;
  for (const auto& part : fs::path(rel)) {
    at /= part;
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) return false;
    if (S_ISLNK(st.st_mode)) return true;
  }
  return false;
}

// The names a patch writes to, checked before patch runs: relative once
// `strip` components are gone, without "..", never through a link in the
// tree. Unified headers (---, +++) and git's (diff --git, rename and copy
// from/to, whose names are not stripped). GNU patch refuses such names too;
// this says which patch, before anything is written.
void check_patch_paths(const fs::path& patch, int strip, const fs::path& tree, const std::string& name) {
  std::string text = read_file(patch);
  auto check = [&](std::string file, int levels) {
    file = file.substr(0, file.find('\t'));
    if (file == "/dev/null" || file.empty()) return;
    if (file.front() == '"') return;  // a quoted (C-escaped) name: patch itself refuses what escapes
    std::string rel = file;
    for (int i = 0; i < levels && rel.find('/') != std::string::npos; ++i) rel = rel.substr(rel.find('/') + 1);
    while (rel.find("//") != std::string::npos) rel.erase(rel.find("//"), 1);
    bool escapes = rel.empty() || rel[0] == '/' || ("/" + rel + "/").find("/../") != std::string::npos;
    if (escapes || through_link(tree, rel))
      throw Error("debian/patches/" + name + ": refusing the patch: it names '" + file + "', which is " +
                  (escapes ? "outside the tree" : "through a symbolic link in the tree"));
  };
  for (std::string_view view : lines(text)) {
    const std::string line(view);
    if (line.starts_with("--- ") || line.starts_with("+++ ")) {
      check(line.substr(4), strip);
    } else if (line.starts_with("diff --git ")) {
      for (const auto& word : apt::split_words(std::string_view(line).substr(11))) check(word, strip);
    } else {
      for (const char* git : {"rename from ", "rename to ", "copy from ", "copy to "})
        if (line.starts_with(git)) check(line.substr(std::string_view(git).size()), 0);
    }
  }
}

// The patches of debian/patches/series (or debian.series, Debian's vendor
// series, first), each with its strip level.
std::vector<std::pair<std::string, int>> read_series(const fs::path& tree) {
  std::vector<std::pair<std::string, int>> out;
  std::string series;
  for (const char* name : {"debian.series", "series"})
    if (fs::exists(fs::symlink_status(tree / "debian/patches" / name))) {
      series = name;
      break;
    }
  if (series.empty()) return out;
  if (through_link(tree, "debian/patches/" + series) || !fs::is_regular_file(tree / "debian/patches" / series))
    throw Error("debian/patches/" + series + " is not a regular file of the tree");
  const std::string text = read_file(tree / "debian/patches" / series);
  for (std::string_view view : lines(text)) {
    std::string line(view);
    if (size_t hash = line.find('#'); hash != std::string::npos &&
                                      (hash == 0 || line.find_first_not_of(" \t") == hash ||
                                       line[hash - 1] == ' ' || line[hash - 1] == '\t'))
      line = line.substr(0, hash);
    auto words = apt::split_words(line);
    if (words.empty()) continue;
    int strip = 1;
    if (words.size() > 1) {
      auto level = words[1].starts_with("-p") ? parse_integer<int>(words[1].substr(2)) : std::nullopt;
      if (!level || words.size() > 2 || *level < 0)
        throw Error("debian/patches/" + series + ": '" + line + "': a patch's only option is -pN");
      strip = *level;
    }
    const std::string& p = words[0];
    if (p[0] == '/' || ("/" + p + "/").find("/../") != std::string::npos)
      throw Error("debian/patches/" + series + " names '" + p + "', outside debian/patches");
    out.push_back({p, strip});
  }
  return out;
}

// Applies `patch` (checked first: check_patch_paths) to `tree` as dpkg-source
// does: no fuzz, forward only, files left empty removed, no backups or
// reject files. `what` names it in the error.
void run_patch(const fs::path& tree, const fs::path& patch, int strip, const std::string& name, const std::string& what) {
  check_patch_paths(patch, strip, tree, name);
  ProcessSpec spec;
  spec.argv = {"patch", "-s", "-t", "-F", "0", "-N", "-p" + std::to_string(strip), "-u", "-V", "never", "-E",
               "--no-backup-if-mismatch", "--reject-file=-", "-i", fs::absolute(patch).string()};
  spec.env = {{"PATH", env_or("PATH", "/usr/bin:/bin")}, {"LC_ALL", "C"}};
  spec.cwd = tree;
  spec.capture_stdout = true;
  spec.merge_stderr = true;
  ProcessResult r = run_process(spec);
  if (r.exit_status != 0) {
    std::string out = r.output.size() > 2000 ? "..." + r.output.substr(r.output.size() - 2000) : r.output;
    throw Error(what + " does not apply (patch -p" + std::to_string(strip) + ", exit status " +
                std::to_string(r.exit_status) + "):\n" + out);
  }
}

void apply_patches(const fs::path& tree) {
  for (const auto& [name, strip] : read_series(tree)) {
    const std::string rel = "debian/patches/" + name;
    if (through_link(tree, rel) || !fs::is_regular_file(tree / rel))
      throw Error("patch " + rel + " (debian/patches/series) is not a regular file of the tree");
    run_patch(tree, tree / rel, strip, name, "the Debian patch " + rel);
  }
}

void extract_into(const Store& store, const DebianFile& f, const fs::path& dest, bool strip,
                  std::function<std::string(const std::string&)> map = {}) {
  ArchiveOptions o;
  o.label = f.name;
  o.strip_single_top = strip;
  o.normalize_modes = true;  // as dpkg-source's tar and its fixperms leave them (umask 022)
  o.map = std::move(map);
  extract_archive(store.blob_path(f.sha256), dest, o);
}

bool is_tarball(const std::string& name, const std::string& stem) {
  if (!name.starts_with(stem)) return false;
  std::string ext = name.substr(stem.size());
  return ext == ".gz" || ext == ".xz" || ext == ".bz2" || ext == ".lzma" || ext == ".zst";
}

}  // namespace

void to_json(nlohmann::json& j, const DebianSource& s) {
  auto file = [](const DebianFile& f) { return nlohmann::json{{"name", f.name}, {"sha256", f.sha256.hex()}, {"size", f.size}}; };
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : s.files) files.push_back(file(f));
  j = {{"debian", s.name}, {"version", s.version}, {"suite", s.suite}, {"format", s.format},
       {"directory", s.directory}, {"dsc", file(s.dsc)}, {"files", files}};
}

void from_json(const nlohmann::json& j, DebianSource& s) {
  auto file = [](const nlohmann::json& f) {
    DebianFile out{f.at("name").get<std::string>(), Digest::parse("sha256:" + f.at("sha256").get<std::string>()),
                   f.at("size").get<uint64_t>()};
    if (!plain_name(out.name)) throw Error("'" + out.name + "' is not a plain file name");
    return out;
  };
  s.name = j.at("debian").get<std::string>();
  s.version = j.at("version").get<std::string>();
  s.suite = j.at("suite").get<std::string>();
  s.format = j.at("format").get<std::string>();
  s.directory = j.at("directory").get<std::string>();
  if (s.directory.empty() || canonical_archive_path(s.directory) != s.directory)
    throw Error("'" + s.directory + "' is not a path in a repository");
  s.dsc = file(j.at("dsc"));
  s.files.clear();
  for (const auto& f : j.at("files")) s.files.push_back(file(f));
}

std::string debian_default_suite(const fs::path& root) { return apt::machine_codename(root); }

void read_dsc(const std::string& text, DebianSource& s) {
  const std::string what = s.dsc.name;
  auto paragraphs = apt::parse_paragraphs(apt::strip_clearsign(text));
  if (paragraphs.empty()) throw Error(what + ": an empty .dsc");
  const apt::Paragraph& p = paragraphs.front();
  if (p.get("Source") != s.name || p.get("Version") != s.version)
    throw Error(what + " is " + p.get("Source") + " " + p.get("Version") + ", not " + s.name + " " + s.version);
  if (!s.format.empty() && p.get("Format") != s.format)
    throw Error(what + " says Format '" + p.get("Format") + "', the index '" + s.format + "'");
  s.format = p.get("Format");
  std::vector<DebianFile> listed = parse_checksums(p.get("Checksums-Sha256"), what);
  auto key = [](const DebianFile& f) { return std::make_tuple(f.name, f.sha256.hex(), f.size); };
  std::set<std::tuple<std::string, std::string, uint64_t>> a, b;
  for (const auto& f : listed) a.insert(key(f));
  for (const auto& f : s.files) b.insert(key(f));
  if (!s.files.empty() && a != b) {
    std::string diff;
    for (const auto& f : listed)
      if (!b.count(key(f))) diff += "\n  " + f.name + " sha256:" + f.sha256.hex() + " (the .dsc) is not what the index lists";
    for (const auto& f : s.files)
      if (!a.count(key(f))) diff += "\n  " + f.name + " sha256:" + f.sha256.hex() + " (the index) is not what the .dsc lists";
    throw Error(what + ": its files are not those the signed index pins:" + diff);
  }
  s.files = listed;
}

void unpack_debian_source(const DebianSource& s, const Store& store, const fs::path& dest) {
  const std::string stem = s.name + "_" + upstream_of(s.version);
  std::optional<DebianFile> orig, debian, native, diff;
  std::map<std::string, DebianFile> components;
  for (const auto& f : s.files) {
    if (f.name.ends_with(".asc")) continue;  // an upstream signature: not unpacked
    if (is_tarball(f.name, stem + ".orig.tar")) {
      orig = f;
    } else if (f.name.starts_with(stem + ".orig-") && f.name.find(".tar.") != std::string::npos) {
      std::string comp = f.name.substr(stem.size() + 6);
      comp = comp.substr(0, comp.find(".tar."));
      if (comp.empty() || comp.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
                              std::string::npos || !is_tarball(f.name, stem + ".orig-" + comp + ".tar"))
        throw Error(s.dsc.name + " lists '" + f.name + "', not an orig-COMPONENT tarball dpkg-source takes");
      components[comp] = f;
    } else if (is_tarball(f.name, s.name + "_" + without_epoch(s.version) + ".debian.tar")) {
      debian = f;
    } else if (is_tarball(f.name, s.name + "_" + without_epoch(s.version) + ".tar")) {
      native = f;
    } else if (f.name == s.name + "_" + without_epoch(s.version) + ".diff.gz") {
      diff = f;
    } else {
      throw Error(s.dsc.name + " lists '" + f.name + "', which stackbuild does not know how to unpack");
    }
  }
  fs::create_directories(dest);
  if (s.format == "1.0") {
    // One tarball (native), or the orig tarball and the Debian diff, applied
    // with -p1 (its paths are NAME-UPSTREAM.orig/... and NAME-UPSTREAM/...).
    if (debian || !components.empty() || (native && (orig || diff)) || (!native && !orig))
      throw Error(s.dsc.name + ": a 1.0 package is one tarball " + s.name + "_" + without_epoch(s.version) +
                  ".tar.gz, or an orig tarball and (optionally) a .diff.gz");
    extract_into(store, native ? *native : *orig, dest, true);
    if (diff) {
      TempDir tmp;
      const fs::path patch = tmp.path() / "diff";
      write_file_atomic(patch, apt::decompress(store.read(diff->sha256), diff->name));
      run_patch(dest, patch, 1, diff->name, "the Debian diff " + diff->name);
    }
    // As dpkg-source -x leaves a 1.0 tree: debian/rules executable.
    if (!through_link(dest, "debian/rules") && fs::is_regular_file(dest / "debian/rules"))
      fs::permissions(dest / "debian/rules", fs::perms(0755));
    return;
  }
  if (s.format == "3.0 (native)") {
    if (!native || orig || debian || !components.empty())
      throw Error(s.dsc.name + ": a 3.0 (native) package is one tarball " + s.name + "_" +
                  without_epoch(s.version) + ".tar.*");
    extract_into(store, *native, dest, true);
    return;
  }
  if (s.format != "3.0 (quilt)")
    throw Error(s.dsc.name + " is of Format '" + s.format +
                "'; stackbuild unpacks \"3.0 (quilt)\", \"3.0 (native)\" and \"1.0\" source packages");
  if (!orig || !debian || native)
    throw Error(s.dsc.name + ": a 3.0 (quilt) package is an orig tarball and a debian tarball");
  extract_into(store, *orig, dest, true);
  for (const auto& [comp, f] : components) {  // in name order, as dpkg-source
    fs::remove_all(dest / comp);
    extract_into(store, f, dest / comp, true);
  }
  fs::remove_all(dest / "debian");
  // The debian tarball over the tree, without quilt's state (.pc), as dpkg-source.
  extract_into(store, *debian, dest, false, [](const std::string& path) -> std::string {
    fs::path p(path);
    auto it = p.begin();
    if (it != p.end() && *it == ".pc") return "";
    if (it != p.end() && ++it != p.end() && *it == ".pc") return "";
    return path;
  });
  apply_patches(dest);
}

std::vector<fs::path> uploader_keyrings(const fs::path& root) {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("STACKBUILD_DEBIAN_KEYRINGS"); env && *env) {
    std::string list = env;
    for (size_t p = 0; p <= list.size();) {
      size_t e = list.find(':', p);
      if (e == std::string::npos) e = list.size();
      if (e > p) {
        fs::path k = list.substr(p, e - p);
        std::error_code ec;
        if (!fs::is_regular_file(k, ec))
          throw Error("STACKBUILD_DEBIAN_KEYRINGS names " + k.string() + ", which is not a file");
        out.push_back(k);
      }
      p = e + 1;
    }
    return out;
  }
  for (const char* name : {"debian-keyring.gpg", "debian-maintainers.gpg"}) {
    fs::path k = root / "usr/share/keyrings" / name;
    std::error_code ec;
    if (fs::is_regular_file(k, ec)) out.push_back(k);
  }
  return out;
}

DebianSource prepare_debian_source(const DebianRequest& req, const fs::path& dest, const Store& store,
                                   fetch::Fetcher& fetcher) {
  const std::string suite = !req.suite.empty() ? req.suite : debian_default_suite(req.root);
  const std::string asked = req.name + (req.version.empty() ? "" : " " + req.version) + " (" + suite + ")";
  if (suite.empty())
    throw Error("Debian source " + req.name + ": no suite given, and the machine names no release (VERSION_CODENAME in " +
                (req.root / "etc/os-release").string() + ")");
  std::vector<std::string> notes;
  std::vector<apt::Repository> repos = suite_repositories(req.root, suite, notes);
  if (repos.empty()) {
    std::string msg = "Debian source " + asked + ": the machine's apt configuration (" +
                      (req.root / "etc/apt").string() + ") names no repository of " + suite + " that is checked";
    for (const auto& n : notes) msg += "\n  " + n;
    throw Error(msg);
  }
  DebianSource s;
  std::string uri;
  if (req.locked) {  // no index: the pinned .dsc, from the first repository that has it
    s = *req.locked;
    std::optional<fetch::FetchError> last;
    for (const auto& r : repos) {
      try {
        fetcher.fetch_one({r.uri + "/" + s.directory + "/" + s.dsc.name, s.dsc.sha256, s.dsc.size, s.dsc.name});
        uri = r.uri;
        break;
      } catch (const fetch::FetchError& e) {
        if (e.status() != 404 && e.status() != 410) throw;
        last = e;
        notes.push_back(r.id() + ": no " + s.directory + "/" + s.dsc.name);
      }
    }
    if (uri.empty()) {
      std::string msg = "Debian source " + asked + ": no repository of the machine has the locked " + s.dsc.name;
      for (const auto& n : notes) msg += "\n  " + n;
      throw Error(msg);
    }
  } else {
    std::optional<apt::Paragraph> found;
    for (const auto& r : repos) {
      std::string index;
      try {
        index = read_sources_index(r, req.root, store, fetcher);
      } catch (Error& e) {
        e.add_trace("while reading the source packages of " + r.id() + (r.where.empty() ? "" : " (" + r.where + ")"));
        throw;
      }
      std::vector<std::string> seen;
      auto p = find_paragraph(index, req.name, req.version, seen);
      if (!p) {
        notes.push_back(r.id() + ": " + (seen.empty() ? "no source package " + req.name : "versions " + [&] {
          std::string v;
          for (const auto& x : seen) v += (v.empty() ? "" : ", ") + x;
          return v;
        }()));
        continue;
      }
      if (!found || apt::compare_versions(p->get("Version"), found->get("Version")) > 0) {
        found = p;
        uri = r.uri;
      }
    }
    if (!found) {
      std::string msg = "Debian source " + asked + ": not in the machine's repositories of " + suite;
      for (const auto& n : notes) msg += "\n  " + n;
      throw Error(msg, ErrorKind::Input);
    }
    s = from_paragraph(*found, suite, uri + "/dists/" + suite + "/main/source/Sources");
    fetcher.fetch_one({uri + "/" + s.directory + "/" + s.dsc.name, s.dsc.sha256, s.dsc.size, s.dsc.name});
  }
  try {
    // The uploader's signature, where the machine has Debian's keyrings.
    const std::vector<fs::path> keyrings = uploader_keyrings(req.root);
    if (!keyrings.empty()) {
      const apt::Signer who =
          apt::verify_signer(store.blob_path(s.dsc.sha256), keyrings, s.dsc.name + " (the uploader's signature)");
      std::string names;
      for (const auto& k : keyrings) names += (names.empty() ? "" : ", ") + k.filename().string();
      s.signature = !who.fingerprint.empty()
                        ? "signed by " + who.fingerprint + ", a key of " + names +
                              (who.expired ? " (expired in this copy of it)" : "")
                        : "signed by key " + who.key_id + ", which is in none of " + names +
                              ": the uploader is not checked, the hash chain from the InRelease is";
    }
    read_dsc(store.read(s.dsc.sha256), s);
    fetch_files(s, uri, fetcher);
    unpack_debian_source(s, store, dest);
  } catch (Error& e) {
    e.add_trace("while preparing Debian's source package " + s.name + " " + s.version + " (" + suite + ", " +
                s.directory + "/" + s.dsc.name + ")");
    throw;
  }
  return s;
}

}  // namespace sb::source

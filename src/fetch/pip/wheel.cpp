#include "fetch/pip/wheel.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>

#include "archive/entry.hpp"
#include "fetch/pip/version.hpp"
#include "fetch/pip/zip.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::pip {

namespace {

struct Written {
  std::string hash;
  uint64_t size = 0;
};

// Writes chunks to `path` (mode), hashing on the way; with claims, through a
// temporary name renamed by PathClaims::commit.
class FileOut {
 public:
  FileOut(const fs::path& path, int mode, PathClaims* claims, int order)
      : path_(path), claims_(claims), order_(order) {
    fs::create_directories(path.parent_path());
    temp_ = claims ? fs::path(path.string() + ".sb-" + std::to_string(order)) : path;
    fd_.reset(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode));
    if (fd_.get() < 0) throw_errno("create " + temp_.string());
    ::fchmod(fd_.get(), static_cast<mode_t>(mode));
  }
  ~FileOut() {
    if (claims_ && fd_.get() >= 0) ::unlink(temp_.c_str());
  }
  void write(const void* d, size_t n) {
    write_all(fd_.get(), d, n, path_.string());
    sha_.update(d, n);
    size_ += n;
  }
  Written finish() {
    fd_.reset();
    if (claims_) claims_->commit(temp_, path_, order_);
    return {record_hash(sha_.finish().hex()), size_};
  }

 private:
  fs::path path_, temp_;
  PathClaims* claims_;
  int order_;
  UniqueFd fd_;
  Sha256 sha_;
  uint64_t size_ = 0;
};

std::string image_path(const fs::path& p) { return p.lexically_normal().relative_path().string(); }

// Entry points of one group ("[console_scripts]") from entry_points.txt.
std::vector<std::pair<std::string, std::string>> entry_points(const std::string& text, const std::string& group) {
  std::vector<std::pair<std::string, std::string>> out;
  bool in = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(pos, e - pos);
    pos = e + 1;
    size_t b = line.find_first_not_of(" \t\r"), l = line.find_last_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#' || line[b] == ';') continue;
    line = line.substr(b, l - b + 1);
    if (line[0] == '[') {
      in = line == "[" + group + "]";
      continue;
    }
    size_t eq = line.find('=');
    if (!in || eq == std::string::npos) continue;
    std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    name = name.substr(0, name.find_last_not_of(" \t") + 1);
    value = value.substr(value.find_first_not_of(" \t"));
    if (size_t br = value.find('['); br != std::string::npos) value = value.substr(0, value.find_last_not_of(" \t", br - 1) + 1);
    out.emplace_back(name, value);
  }
  return out;
}

// "a.b:c" -> image path under the scheme it belongs to.
fs::path scheme_dir(const std::string& scheme, const Target& t, const std::string& project, const std::string& wheel) {
  if (scheme == "purelib" || scheme == "platlib") return t.site();
  if (scheme == "scripts") return t.prefix + "/bin";
  if (scheme == "headers") return t.prefix + "/include/python" + t.python + "/" + project;
  if (scheme == "data") return t.prefix;
  throw Error("wheel " + wheel + ": unknown .data scheme '" + scheme + "'");
}

}  // namespace

void PathClaims::commit(const fs::path& temp, const fs::path& dest, int order) {
  std::lock_guard<std::mutex> g(mu_);
  auto [it, fresh] = owner_.emplace(dest.string(), order);
  if (!fresh && it->second > order) {  // a later wheel's file is already there
    ::unlink(temp.c_str());
    return;
  }
  it->second = order;
  if (::rename(temp.c_str(), dest.c_str()) != 0) throw_errno("rename " + temp.string());
}

std::string record_hash(const std::string& hex) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  std::string out = "sha256=";
  for (size_t i = 0; i < raw.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(raw[i]) << 16;
    if (i + 1 < raw.size()) n |= static_cast<uint8_t>(raw[i + 1]) << 8;
    if (i + 2 < raw.size()) n |= static_cast<uint8_t>(raw[i + 2]);
    size_t chars = i + 2 < raw.size() ? 4 : i + 1 < raw.size() ? 3 : 2;
    for (size_t k = 0; k < chars; ++k) out += abc[(n >> (18 - 6 * k)) & 63];
  }
  return out;
}

std::string console_script(const std::string& interpreter, const std::string& entry) {
  std::string module = entry.substr(0, entry.find(':'));
  std::string attr = entry.find(':') == std::string::npos ? "" : entry.substr(entry.find(':') + 1);
  std::string first = attr.substr(0, attr.find('.'));
  std::string import = attr.empty() ? "import " + module : "from " + module + " import " + first;
  std::string call = attr.empty() ? module : attr;
  return "#!" + interpreter + "\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n" + import +
         "\nif __name__ == \"__main__\":\n    sys.argv[0] = re.sub(r\"(-script\\.pyw|\\.exe)?$\", \"\", sys.argv[0])\n"
         "    sys.exit(" + call + "())\n";
}

InstalledWheel install_wheel(const fs::path& wheel, const std::string& filename, const Target& target,
                             const fs::path& root, bool requested, PathClaims* claims, int order) {
  auto wn = WheelName::parse(filename);
  if (!wn) throw Error("'" + filename + "' is not a wheel file name");
  InstalledWheel out;
  out.name = wn->name;
  out.version = wn->version;
  std::string data_dir = wn->name + "-" + wn->version + ".data/";
  fs::path site = target.site();
  std::map<std::string, Written> record;  // image path -> hash, size
  std::string dist_info;

  ZipReader zip(wheel, "wheel " + filename);
  for (const ZipMember& m : zip.members()) {
    const std::string& name = m.name;
    if (m.directory()) continue;
    std::string clean;
    try {
      if (name.starts_with("/")) throw Error("absolute path");
      clean = canonical_archive_path(name);
    } catch (const Error& err) {
      throw Error("wheel " + filename + " holds '" + name + "': " + err.what());
    }
    if (!m.regular()) throw Error("wheel " + filename + " holds '" + name + "', which is not a regular file");
    std::string first = clean.substr(0, clean.find('/'));
    if (first.ends_with(".dist-info") && clean.find('/') != std::string::npos) dist_info = first;
    if (first.ends_with(".dist-info") && (clean.ends_with("/RECORD") || clean.ends_with("/RECORD.jws") ||
                                          clean.ends_with("/RECORD.p7s") || clean.ends_with("/INSTALLER")))
      continue;  // rewritten below
    fs::path dest;
    bool script = false;
    if (clean.starts_with(data_dir)) {
      std::string rest = clean.substr(data_dir.size());
      size_t slash = rest.find('/');
      if (slash == std::string::npos) throw Error("wheel " + filename + ": '" + name + "' is outside any scheme");
      std::string scheme = rest.substr(0, slash);
      dest = scheme_dir(scheme, target, wn->name, filename) / rest.substr(slash + 1);
      script = scheme == "scripts";
    } else {
      dest = site / clean;
    }
    FileOut f(root / dest.relative_path(), m.executable() || script ? 0755 : 0644, claims, order);
    bool head = script;
    zip.read(m, [&](const char* data, size_t n) {
      std::string_view chunk(data, n);
      if (head) {  // "#!python" -> the image's interpreter
        head = false;
        if (chunk.starts_with("#!python")) {
          size_t nl = chunk.find('\n');
          std::string line = "#!" + target.interpreter;
          f.write(line.data(), line.size());
          chunk = nl == std::string_view::npos ? std::string_view() : chunk.substr(nl);
        }
      }
      f.write(chunk.data(), chunk.size());
    });
    Written w = f.finish();
    out.bytes += w.size;
    record[image_path(dest)] = w;
  }
  if (dist_info.empty()) throw Error("wheel " + filename + " has no .dist-info directory");
  fs::path di = site / dist_info;
  out.dist_info = image_path(di);

  // Console and GUI scripts from entry_points.txt.
  fs::path ep = root / di.relative_path() / "entry_points.txt";
  if (fs::exists(ep)) {
    std::string text = read_file(ep);
    for (const char* group : {"console_scripts", "gui_scripts"})
      for (const auto& [script, entry] : entry_points(text, group)) {
        if (script.find('/') != std::string::npos || script.empty() || script == "." || script == "..")
          throw Error("wheel " + filename + ": entry point '" + script + "' is not a file name");
        fs::path dest = fs::path(target.prefix) / "bin" / script;
        FileOut f(root / dest.relative_path(), 0755, claims, order);
        std::string body = console_script(target.interpreter, entry);
        f.write(body.data(), body.size());
        record[image_path(dest)] = f.finish();
      }
  }
  auto small = [&](const std::string& file, const std::string& body) {
    fs::path dest = di / file;
    FileOut f(root / dest.relative_path(), 0644, claims, order);
    f.write(body.data(), body.size());
    record[image_path(dest)] = f.finish();
  };
  small("INSTALLER", "stackbuild\n");
  if (requested) small("REQUESTED", "");
  // RECORD: paths relative to site-packages, sorted; RECORD itself unhashed.
  std::string rec;
  std::string site_rel = image_path(site);
  for (const auto& [p, w] : record) {
    std::string rel = fs::path(p).lexically_relative(site_rel).string();
    if (rel.find_first_of(",\"\n") != std::string::npos) rel = "\"" + rel + "\"";
    rec += rel + "," + w.hash + "," + std::to_string(w.size) + "\n";
    out.files.push_back(p);
  }
  rec += dist_info + "/RECORD,,\n";
  write_file_atomic(root / di.relative_path() / "RECORD", rec);
  out.files.push_back(image_path(di / "RECORD"));
  return out;
}

}  // namespace sb::pip

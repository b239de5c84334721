#include "store/gc.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace sb::gc {

using json = nlohmann::json;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Root: return "roots";
    case Kind::Rootfs: return "rootfs";
    case Kind::Temp: return "tmp";
    case Kind::Lock: return "locks";
    case Kind::Record: return "records";
    case Kind::Blob: return "blobs";
    case Kind::Cache: return "cache";
    case Kind::Log: return "logs";
    case Kind::Builtin: return "builtin-tests";
  }
  return "?";
}

const char* why_name(Why w) {
  switch (w) {
    case Why::Unpacked: return "unpacked root";
    case Why::Temporary: return "temporary";
    case Why::Dangling: return "names a missing blob";
    case Why::Unreferenced: return "no record names it";
    case Why::Old: return "unused too long";
    case Why::LeastRecent: return "least recently used";
    case Why::All: return "--all";
  }
  return "?";
}

static bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<Digest> digests_in(std::string_view text) {
  std::vector<Digest> out;
  for (size_t at = text.find("sha256:"); at != std::string_view::npos; at = text.find("sha256:", at + 7)) {
    std::string_view hex = text.substr(at + 7, 64);
    if (is_hex64(hex) && (at + 71 == text.size() || !std::isxdigit(static_cast<unsigned char>(text[at + 71]))))
      out.push_back(Digest::parse("sha256:" + std::string(hex)));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// What each kind of record needs. The formats are the writers' (pipeline/,
// fetch/, apt/, registry/); a kind not listed here is kept whole by the blobs
// its text names and is never taken for dangling.
void read_record(std::string_view kind, std::string_view text, Item& item) {
  item.refs = digests_in(text);
  try {
    auto trimmed = [&] {
      std::string s(text);
      while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
      return s;
    };
    if (kind == "sbom-layer") {  // what a layer holds for SBOMs (image/sbom.hpp): lives while the layer does
      item.refs.clear();
      item.needs.push_back(Digest::parse(json::parse(text).at("layer").get<std::string>()));
    } else if (kind == "layer") {
      item.needs.push_back(Digest::parse(json::parse(text).at("digest").get<std::string>()));
    } else if (kind == "layer-parts") {
      json j = json::parse(text);
      if (!j.is_array() || j.empty()) throw Error("not a list of layers");
      for (const auto& l : j) item.needs.push_back(Digest::parse(l.at("digest").get<std::string>()));
    } else if (kind == "url" || kind == "apt-index") {
      item.needs.push_back(Digest::parse(trimmed()));
    } else if (kind == "base-manifest") {
      item.needs.push_back(Digest::parse(json::parse(text).at("manifest").get<std::string>()));
    } else if (kind == "archive-keyring") {  // a distribution's keyring from Debian's package (fetch/apt/keyring.hpp)
      item.needs.push_back(Digest::parse(json::parse(text).at("keyring").get<std::string>()));
    } else if (kind == "download") {
      item.needs.push_back(Digest::parse(json::parse(text).at("blob").get<std::string>()));
    }
  } catch (const std::exception&) {  // json::exception or sb::Error from Digest::parse
    item.corrupt = true;
    item.needs.clear();
  }
}

namespace {

struct Walker {
  std::set<std::pair<dev_t, ino_t>> seen;  // hard-linked inodes, counted once

  uint64_t disk(const struct stat& st) {
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !seen.insert({st.st_dev, st.st_ino}).second) return 0;
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }

  // One entry of a store folder: a file, or a whole tree.
  Item item(Kind kind, const fs::path& root, const fs::path& p) {
    Item it;
    it.kind = kind;
    it.path = p.string().substr(root.string().size() + (root.string().back() == '/' ? 0 : 1));  // p is under root
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return it;
    it.used = st.st_mtime;
    it.bytes = disk(st);
    it.linked = !S_ISDIR(st.st_mode) && st.st_nlink > 1;
    if (S_ISDIR(st.st_mode)) {
      std::error_code ec;
      for (auto i = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && i != fs::recursive_directory_iterator(); i.increment(ec)) {
        struct stat s;
        if (::lstat(i->path().c_str(), &s) == 0) it.bytes += disk(s);
      }
    }
    return it;
  }
};

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto i = fs::directory_iterator(dir, ec); !ec && i != fs::directory_iterator(); i.increment(ec))
    out.push_back(i->path());
  std::sort(out.begin(), out.end());
  return out;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// A small JSON blob (a manifest or an index) names the blobs it is made of.
std::vector<Digest> blob_refs(const fs::path& p, uint64_t size) {
  if (size == 0 || size > (1u << 20)) return {};
  char first = 0;
  {
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0 || ::read(fd.get(), &first, 1) != 1 || first != '{') return {};
  }
  try {
    return digests_in(read_file(p));
  } catch (const Error&) {
    return {};
  }
}

}  // namespace

Scan scan(const Store& store) {
  const fs::path& root = store.root();
  Scan s;
  Walker w;
  std::map<Digest, size_t> blob_at;
  for (const fs::path& top : entries(root)) {
    std::string name = top.filename().string();
    std::vector<fs::path> in = fs::is_directory(top) && !fs::is_symlink(top) ? entries(top) : std::vector<fs::path>{};
    auto each = [&](Kind kind, std::string_view temp_prefix = {}) {
      for (const auto& p : in) {
        bool temp = !temp_prefix.empty() && starts_with(p.filename().string(), temp_prefix);
        s.items.push_back(w.item(temp ? Kind::Temp : kind, root, p));
      }
    };
    if (name == "blobs") {
      for (const auto& p : entries(top / "sha256")) {
        std::string n = p.filename().string();
        if (is_hex64(n)) {
          s.items.push_back(w.item(Kind::Blob, root, p));
          s.items.back().digest = Digest::parse("sha256:" + n);
          blob_at.emplace(*s.items.back().digest, s.items.size() - 1);
        } else if (n.find(".tmp-") != std::string::npos) {
          s.items.push_back(w.item(Kind::Temp, root, p));
        } else {
          s.other_bytes += w.item(Kind::Temp, root, p).bytes;
        }
      }
    } else if (name == "refs") {
      for (const auto& kdir : in) {
        std::string kind = kdir.filename().string();
        for (const auto& p : entries(kdir)) {
          std::string n = p.filename().string();
          if (is_hex64(n)) {
            s.items.push_back(w.item(Kind::Record, root, p));
            try {
              read_record(kind, read_file(p), s.items.back());
            } catch (const Error&) {
              s.items.back().corrupt = true;  // unreadable
            }
          } else if (n.find(".tmp-") != std::string::npos) {
            s.items.push_back(w.item(Kind::Temp, root, p));
          } else {
            s.other_bytes += w.item(Kind::Temp, root, p).bytes;
          }
        }
      }
    } else if (name == "roots") {
      for (const auto& p : in) {
        std::string n = p.filename().string();
        // A root's size record (verify/unpacked.hpp) goes with its root; without the root it is garbage.
        if (starts_with(n, ".size-")) {
          if (!fs::exists(top / n.substr(6))) s.items.push_back(w.item(Kind::Temp, root, p));
          continue;
        }
        s.items.push_back(w.item(starts_with(n, ".unpack-") ? Kind::Temp : Kind::Root, root, p));
      }
    } else if (name == "rootfs") {
      each(Kind::Rootfs);
    } else if (name == "tmp") {
      each(Kind::Temp);
    } else if (name == "locks") {
      each(Kind::Lock);
    } else if (name == "cache") {
      each(Kind::Cache);
    } else if (name == "logs") {
      each(Kind::Log);
    } else if (name == "builtin-tests") {
      each(Kind::Builtin, ".compile-");
    } else {
      s.other_bytes += w.item(Kind::Temp, root, top).bytes;  // store.lock, and what gc does not know
    }
  }
  // The blobs records reach, and what those name in turn (a base image's
  // manifest names its config and layers).
  std::vector<Digest> todo;
  std::set<Digest> done;
  for (const auto& it : s.items)
    if (it.kind == Kind::Record) todo.insert(todo.end(), it.refs.begin(), it.refs.end());
  while (!todo.empty()) {
    Digest d = todo.back();
    todo.pop_back();
    auto at = blob_at.find(d);
    if (at == blob_at.end() || !done.insert(d).second) continue;
    Item& b = s.items[at->second];
    struct stat st;
    if (::stat((root / b.path).c_str(), &st) != 0) continue;
    b.refs = blob_refs(root / b.path, static_cast<uint64_t>(st.st_size));
    todo.insert(todo.end(), b.refs.begin(), b.refs.end());
  }
  return s;
}

Plan plan(const Scan& scan, const Options& o) {
  const auto& items = scan.items;
  Plan p;
  std::vector<bool> gone(items.size(), false);
  std::vector<Plan::Removal> out;
  uint64_t size = scan.other_bytes;
  for (const auto& it : items) size += it.bytes;
  p.before = size;
  auto remove = [&](size_t i, Why why) {
    if (gone[i]) return;
    gone[i] = true;
    out.push_back({i, why});
    size -= items[i].bytes;
  };
  auto evictable = [](Kind k) { return k == Kind::Record || k == Kind::Cache || k == Kind::Log || k == Kind::Builtin; };

  for (size_t i = 0; i < items.size(); ++i) {
    Kind k = items[i].kind;
    if (o.all) remove(i, Why::All);
    else if (k == Kind::Root || k == Kind::Rootfs) remove(i, Why::Unpacked);
    else if ((k == Kind::Temp || k == Kind::Lock) && !o.roots_only) remove(i, Why::Temporary);
  }
  if (!o.all && !o.roots_only) {
    std::map<Digest, size_t> blob_at;
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].kind == Kind::Blob) blob_at.emplace(*items[i].digest, i);
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      if (it.kind != Kind::Record) continue;
      bool dangling = it.corrupt || std::any_of(it.needs.begin(), it.needs.end(), [&](const Digest& d) {
                        return !blob_at.count(d);
                      });
      if (dangling) remove(i, Why::Dangling);
    }
    if (o.older_than)
      for (size_t i = 0; i < items.size(); ++i)
        if (evictable(items[i].kind) && items[i].used < o.now - *o.older_than) remove(i, Why::Old);

    // Each kept record's blobs, through the blobs that name others; a blob
    // lives while some kept record reaches it.
    std::vector<std::vector<size_t>> reach(items.size());
    std::vector<int> holders(items.size(), 0);
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].kind != Kind::Record || gone[i]) continue;
      std::set<size_t> seen;
      std::vector<Digest> todo = items[i].refs;
      while (!todo.empty()) {
        auto at = blob_at.find(todo.back());
        todo.pop_back();
        if (at == blob_at.end() || !seen.insert(at->second).second) continue;
        const auto& more = items[at->second].refs;
        todo.insert(todo.end(), more.begin(), more.end());
      }
      reach[i].assign(seen.begin(), seen.end());
      for (size_t b : reach[i]) ++holders[b];
    }
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].kind == Kind::Blob && holders[i] == 0) remove(i, Why::Unreferenced);

    if (o.max_size && size > *o.max_size) {
      std::vector<size_t> lru;
      for (size_t i = 0; i < items.size(); ++i)
        if (evictable(items[i].kind) && !gone[i]) lru.push_back(i);
      std::sort(lru.begin(), lru.end(), [&](size_t a, size_t b) {
        return std::tie(items[a].used, items[a].path) < std::tie(items[b].used, items[b].path);
      });
      for (size_t i : lru) {
        if (size <= *o.max_size) break;
        remove(i, Why::LeastRecent);
        for (size_t b : reach[i])
          if (--holders[b] == 0) remove(b, Why::LeastRecent);
      }
    }
  }
  // Records first: a gc cut short leaves blobs no record names, never a record without its blob.
  auto rank = [&](const Plan::Removal& r) {
    Kind k = items[r.item].kind;
    return k == Kind::Record ? 0 : k == Kind::Blob ? 1 : 2;
  };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  p.remove = std::move(out);
  p.after = size;
  return p;
}

void apply(const Store& store, const Scan& scan, const Plan& plan) {
  const fs::path& root = store.root();
  int n = 0;
  for (const auto& r : plan.remove) {
    const Item& it = scan.items[r.item];
    fs::path p = root / it.path;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      if (::unlink(p.c_str()) != 0 && errno != ENOENT) throw_errno("remove " + p.string());
      continue;
    }
    // Out of sight first: unpacked_root and cached_root take a directory that exists as whole.
    fs::path doomed = p;
    if (it.kind != Kind::Temp) {
      doomed = root / "tmp" / (".gc-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
      if (::rename(p.c_str(), doomed.c_str()) != 0) throw_errno("rename " + p.string() + " to " + doomed.string());
    }
    remove_tree(doomed);
    if (it.kind == Kind::Root) ::unlink((p.parent_path() / (".size-" + p.filename().string())).c_str());
  }
}

}  // namespace sb::gc

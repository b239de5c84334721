// Hostile inputs at the trust boundary (DESIGN.md): what a layer may put on
// the host's disk (xattrs, devices, setuid bits) through `stackbuild unpack`
// and through the cached roots build steps run in; the store's privacy; the
// `cache:` directories one recipe may reach; the host files a recipe's
// `copy:` may read. Each was seen failing before its fix.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "archive/extract.hpp"
#include "fetch/apt/deb.hpp"
#include "build/steps.hpp"
#include "helpers.hpp"
#include "pipeline/build.hpp"
#include "pipeline/layer_kind.hpp"
#include "pipeline/step_runner.hpp"
#include "store/store.hpp"
#include "tar_fixture.hpp"
#include "util/status.hpp"

using namespace sb;
using test::RawEntry;

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

// The value of xattr `name` on `p`, or nullopt when it has none.
std::optional<std::string> xattr_of(const fs::path& p, const char* name) {
  char buf[256];
  ssize_t n = ::lgetxattr(p.c_str(), name, buf, sizeof buf);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// Whether this filesystem takes user.* xattrs at all (tmpfs before 6.6 does not).
bool user_xattrs_work(const fs::path& dir) {
  fs::path f = dir / ".xattr-probe";
  test::write(f, "");
  bool ok = ::setxattr(f.c_str(), "user.probe", "1", 1, 0) == 0;
  fs::remove(f);
  return ok;
}

// A file capability: VFS_CAP_REVISION_2, CAP_NET_BIND_SERVICE permitted.
std::string file_capability() {
  const unsigned char v[20] = {0, 0, 0, 2, 0, 4, 0, 0};
  return std::string(reinterpret_cast<const char*>(v), sizeof v);
}

// A layer with everything an image should not put on a host as is: overlayfs
// markers in both namespaces, a file capability, a device node, a setuid-root file.
std::vector<RawEntry> hostile_layer(bool device) {
  std::vector<RawEntry> l = {
      {"bin", 'd', "", 0755},
      {"bin/tool", 'f', "t", 0755, -1,
       {{"user.keep", "1"},
        {"user.overlay.redirect", "/etc"},
        {"trusted.overlay.opaque", "y"},
        {"trusted.overlay.redirect", "/etc"},
        {"security.capability", file_capability()},
        {"security.evil", "x"}}},
      {"bin/su", 'f', "s", 04755},
      {"bin/sg", 'f', "g", 02755},
  };
  if (device) l.push_back({"bin/mem", 'c', "", 0666});
  return l;
}

// An uncompressed layer of the tar at `blob`, put into `store`.
Layer stored_layer(const Store& store, const fs::path& blob) {
  Digest d = store.put_file(blob);
  return Layer{d, d, fs::file_size(blob), fs::file_size(blob), "application/vnd.oci.image.layer.v1.tar"};
}

// Build options whose steps run in `sandbox` and whose output goes under `dir`.
BuildOptions options_with(sandbox::Sandbox& sandbox, const fs::path& dir) {
  BuildOptions o;
  o.services.sandbox = &sandbox;
  o.output = dir / "out";
  return o;
}

Recipe recipe_in(const fs::path& dir, const std::string& yaml, const std::string& name = "recipe.yaml") {
  test::write(dir / name, yaml);
  return load_recipe(dir / name);
}

class CacheSandbox final : public sandbox::Sandbox {
 public:
  std::vector<sandbox::SandboxSpec> runs;
  sandbox::SandboxResult run(const sandbox::SandboxSpec& s, const sandbox::OutputFn&) override {
    runs.push_back(s);
    test::write(s.upper / "out", "x\n");
    return {0, false};
  }
};

size_t files_below(const fs::path& dir) {
  size_t n = 0;
  if (fs::exists(dir))
    for (auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) ++n;
  return n;
}

}  // namespace

TEST_CASE("unpack: a layer's trusted.*, security.* and overlay xattrs and setuid bits stay off the host",
          "[extract][hostile]") {
  TempDir tmp;
  fs::path target = tmp.path() / "root";
  fs::create_directories(target);
  fs::path blob = tmp.path() / "layer.tar";
  test::make_tar(blob, hostile_layer(false));
  ExtractStats stats;
  extract_layer(blob, target, ExtractOptions{}, stats);  // as `stackbuild unpack` does, without flags
  fs::path tool = target / "bin/tool";
  CHECK(test::slurp(tool) == "t");
  if (user_xattrs_work(target)) CHECK(xattr_of(tool, "user.keep") == std::optional<std::string>("1"));
  CHECK_FALSE(xattr_of(tool, "user.overlay.redirect"));
  CHECK_FALSE(xattr_of(tool, "trusted.overlay.opaque"));
  CHECK_FALSE(xattr_of(tool, "trusted.overlay.redirect"));
  CHECK_FALSE(xattr_of(tool, "security.capability"));  // owners not preserved: no capabilities
  CHECK_FALSE(xattr_of(tool, "security.evil"));
  // Owned by whoever unpacks (root, maybe): no setuid or setgid bits.
  CHECK((mode_of(target / "bin/su") & 07777) == 0755);
  CHECK((mode_of(target / "bin/sg") & 07777) == 0755);
}

TEST_CASE("a cached root keeps no device nodes, no overlay or trusted xattrs, and is private",
          "[extract][hostile][store]") {
  TempDir tmp;
  Store store(tmp.path() / "store");
  fs::path blob = tmp.path() / "layer.tar";
  test::make_tar(blob, hostile_layer(true));
  Layer layer = stored_layer(store, blob);
  CachedRoot cached = cached_root(store, {layer}, null_status());
  const fs::path root = cached.tree;
  CHECK((mode_of(root.parent_path()) & 07777) == 0700);
  CHECK((mode_of(store.root() / "rootfs") & 07777) == 0700);
  CHECK_FALSE(fs::exists(fs::symlink_status(root / "bin/mem")));  // skipped: the sandbox has its own /dev
  fs::path tool = root / "bin/tool";
  if (user_xattrs_work(root)) CHECK(xattr_of(tool, "user.keep") == std::optional<std::string>("1"));
  CHECK_FALSE(xattr_of(tool, "user.overlay.redirect"));
  CHECK_FALSE(xattr_of(tool, "trusted.overlay.opaque"));
  CHECK_FALSE(xattr_of(tool, "trusted.overlay.redirect"));
  CHECK_FALSE(xattr_of(tool, "security.evil"));
  // No setuid, setgid or capability on the host's disk: recorded beside the
  // tree instead, for the sandbox to give back to the steps.
  CHECK_FALSE(xattr_of(tool, "security.capability"));
  CHECK((mode_of(root / "bin/su") & 07777) == 0755);
  CHECK((mode_of(root / "bin/sg") & 07777) == 0755);
  REQUIRE(cached.privileged.count("bin/su"));
  CHECK(cached.privileged.at("bin/su").mode == 04755);
  CHECK(cached.privileged.at("bin/sg").mode == 02755);
  if (::geteuid() == 0) {  // a capability is the image's only where owners are (as root)
    REQUIRE(cached.privileged.count("bin/tool"));
    CHECK(cached.privileged.at("bin/tool").capability == file_capability());
    CHECK(cached.privileged.at("bin/tool").mode == 0755);
  }

  // A root one layer up is made from this one, hardlinked: the record carries
  // over for the files still there, and follows what the new layer changes.
  fs::path blob2 = tmp.path() / "layer2.tar";
  test::make_tar(blob2, {{"bin", 'd', "", 0755}, {"bin/sg", 'f', "plain", 0755}, {"bin/new", 'f', "n", 04711}});
  Layer layer2 = stored_layer(store, blob2);
  CachedRoot two = cached_root(store, {layer, layer2}, null_status());
  REQUIRE(two.privileged.count("bin/su"));
  CHECK(two.privileged.at("bin/su").mode == 04755);
  CHECK_FALSE(two.privileged.count("bin/sg"));
  REQUIRE(two.privileged.count("bin/new"));
  CHECK(two.privileged.at("bin/new").mode == 04711);
  CHECK((mode_of(two.tree / "bin/new") & 07777) == 0711);
  CHECK(test::slurp(root / "bin/sg") == "g");  // the first root is as it was
  CHECK(cached_root(store, {layer}, null_status()).privileged.count("bin/sg"));
}

// What a step's sandbox sees and what its layer keeps, with the cached root's
// privileged files: the bits are back in the step's view, a file the step
// leaves alone stays out of the layer, one it changes keeps its bits, and a
// step's `chmod u-s` is a change like any other. Overlay and copy modes alike.
class PrivilegedSandbox final : public sandbox::Sandbox {
 public:
  std::map<std::string, mode_t> seen;
  std::optional<std::string> capability;
  sandbox::SandboxResult run(const sandbox::SandboxSpec& s, const sandbox::OutputFn&) override {
    const fs::path top = s.root.empty() ? s.upper : s.root;
    for (const char* f : {"bin/su", "bin/sg", "bin/tool"})
      if (struct stat st; ::lstat((top / f).c_str(), &st) == 0) seen[f] = st.st_mode & 07777;
    capability = xattr_of(top / "bin/tool", "security.capability");
    // As the step would: chmod u-s bin/su; chmod 0750 bin/tool (which keeps
    // its capability: a write would drop it, as the kernel does); bin/sg untouched.
    if (s.root.empty() && !fs::exists(top / "bin/tool")) {  // overlayfs would copy it up first
      fs::create_directories(top / "bin");
      fs::copy_file(s.lower.at(0) / "bin/tool", top / "bin/tool");
    }
    ::chmod((top / "bin/su").c_str(), 0755);
    ::chmod((top / "bin/tool").c_str(), 0750);
    return {0, false};
  }
};

TEST_CASE("a step sees the image's setuid files and capabilities, and its layer keeps what it changed",
          "[build][hostile][store]") {
  for (const char* overlay : {"1", "0"}) {
    DYNAMIC_SECTION("overlay " << overlay) {
      ::setenv("STACKBUILD_SANDBOX_OVERLAY", overlay, 1);
      TempDir tmp;
      Store store(tmp.path() / "store");
      fs::path blob = tmp.path() / "layer.tar";
      test::make_tar(blob, hostile_layer(false));
      Layer base = stored_layer(store, blob);
      Recipe recipe = recipe_in(tmp.path(), "stack: s\nlayers:\n  - {name: steps, build: {run: touch}}\n");
      PrivilegedSandbox fake;
      BuildOptions o = options_with(fake, tmp.path());
      Digest key = base.digest;
      const std::vector<Layer> below{base};
      const std::vector<std::string> below_names{"base"};
      LayerReport r = step_layer_kind().build(
          {recipe, recipe.layers[0], base.digest, below, below_names, store, o, 0, null_status()}, key);
      ::unsetenv("STACKBUILD_SANDBOX_OVERLAY");
      CHECK(fake.seen["bin/su"] == 04755);
      CHECK(fake.seen["bin/sg"] == 02755);
      if (::geteuid() == 0) CHECK(fake.capability == std::optional<std::string>(file_capability()));

      fs::path out = tmp.path() / "layer";
      fs::create_directories(out);
      ExtractOptions eo;
      eo.preserve_owner = true;
      ExtractStats stats;
      extract_layer(store.blob_path(r.layer.digest), out, eo, stats);
      CHECK((mode_of(out / "bin/su") & 07777) == 0755);   // the step's chmod u-s
      CHECK_FALSE(fs::exists(fs::symlink_status(out / "bin/sg")));  // untouched: not in the layer
      CHECK((mode_of(out / "bin/tool") & 07777) == 0750);
      if (::geteuid() == 0) CHECK(xattr_of(out / "bin/tool", "security.capability") == std::optional<std::string>(file_capability()));
      // And the cached root on disk is still without the bits.
      CachedRoot cached = cached_root(store, {base}, null_status());
      CHECK((mode_of(cached.tree / "bin/su") & 07777) == 0755);
      CHECK_FALSE(xattr_of(cached.tree / "bin/tool", "security.capability"));
    }
  }
}

TEST_CASE("the store is private: 0700 when made, and an existing one is tightened", "[store][hostile]") {
  TempDir tmp;
  fs::path root = tmp.path() / "store";
  {
    Store store(root);
    for (const char* sub : {"", "blobs", "blobs/sha256", "refs", "tmp", "locks"})
      CHECK((mode_of(root / sub) & 07777) == 0700);
    auto t = store.temp_dir();
    CHECK((mode_of(t->path()) & 07777) == 0700);
  }
  ::chmod(root.c_str(), 0755);
  ::chmod((root / "tmp").c_str(), 0777);
  Store again(root);
  CHECK((mode_of(root) & 07777) == 0700);
}

TEST_CASE("cache: directories are the recipe's own unless it names a shared one", "[build][hostile]") {
  TempDir tmp;
  test::write(tmp.path() / "a/base/bin/sh", "#!\n", 0755);
  test::write(tmp.path() / "b/base/bin/sh", "#!\n", 0755);
  Store store(tmp.path() / "store");
  CacheSandbox fake;
  BuildOptions o = options_with(fake, tmp.path());
  // Steps that differ, so that neither layer is the other's cache hit.
  auto recipe = [](const std::string& stack, const std::string& cache) {
    return "stack: " + stack + "\nlayers:\n  - {name: base, copy: [{src: base/, dst: /}]}\n" +
           "  - {name: deps, build: {run: make " + stack + ", cache: [" + cache + "]}}\n";
  };
  auto cache_dir = [&](const sandbox::SandboxSpec& s) {
    REQUIRE(s.mounts.size() == 1);
    CHECK(s.mounts[0].target == "/root/.cache/pip");
    return fs::canonical(s.mounts[0].source);
  };
  // The plain form's layer JSON (hashed into the step key) is as it was: no new field.
  const std::string plain = nlohmann::json(recipe_in(tmp.path() / "a", recipe("alpha", "/root/.cache/pip")).layers[1]).dump();
  CHECK(plain.find("\"cache\":[\"/root/.cache/pip\"]") != std::string::npos);
  CHECK(plain.find("shared") == std::string::npos);
  build_recipe(recipe_in(tmp.path() / "a", recipe("alpha", "/root/.cache/pip")), store, o, null_status());
  build_recipe(recipe_in(tmp.path() / "b", recipe("beta", "/root/.cache/pip")), store, o, null_status());
  REQUIRE(fake.runs.size() == 2);
  // A recipe's steps cannot read or poison another recipe's cache.
  CHECK(cache_dir(fake.runs[0]) != cache_dir(fake.runs[1]));

  // Unless both name the same shared cache.
  build_recipe(recipe_in(tmp.path() / "a", recipe("gamma", "{path: /root/.cache/pip, shared: pip}")), store, o,
               null_status());
  build_recipe(recipe_in(tmp.path() / "b", recipe("delta", "{path: /root/.cache/pip, shared: pip}")), store, o,
               null_status());
  REQUIRE(fake.runs.size() == 4);
  CHECK(cache_dir(fake.runs[2]) == cache_dir(fake.runs[3]));
  CHECK(nlohmann::json(recipe_in(tmp.path() / "a", recipe("gamma", "{path: /root/.cache/pip, shared: pip}")).layers[1])
            .dump()
            .find("\"shared_caches\":{\"/root/.cache/pip\":\"pip\"}") != std::string::npos);
  CHECK_THROWS_WITH(recipe_in(tmp.path() / "a", recipe("gamma", "{path: /root/.cache/pip, shared: ../x}")),
                    Catch::Contains("build.cache shared is a name"));
  CHECK(cache_dir(fake.runs[2]) != cache_dir(fake.runs[0]));
}

TEST_CASE("copy: a recipe reads no host file outside its directory or repository", "[build][hostile]") {
  TempDir tmp;
  fs::path dir = tmp.path() / "recipes";
  test::write(dir / "base/bin/sh", "#!\n", 0755);
  Store store(tmp.path() / "store");
  BuildOptions o;
  o.output = tmp.path() / "out";
  auto copying = [](const std::string& src) {
    return "stack: s\nlayers:\n  - name: steal\n    copy:\n      - {src: " + src + ", dst: /stolen}\n";
  };
  const size_t blobs = files_below(store.root() / "blobs");

  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, copying("/etc/passwd")), store, o, null_status()),
                    Catch::Contains("recipe.yaml:5") && Catch::Contains("outside"));
  fs::create_directory_symlink("/etc", dir / "etc");  // inside the directory, pointing out
  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, copying("etc/passwd")), store, o, null_status()),
                    Catch::Contains("recipe.yaml:5") && Catch::Contains("outside"));
  fs::create_symlink("/etc/passwd", dir / "pw");
  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, copying("pw")), store, o, null_status()),
                    Catch::Contains("outside"));
  CHECK(files_below(store.root() / "blobs") == blobs);  // no layer written
  CHECK_FALSE(fs::exists(o.output));

  // Inside a git repository, the repository's files are the recipe's own.
  fs::path repo = tmp.path() / "repo";
  fs::create_directories(repo / ".git");
  test::write(repo / "shared/app.conf", "conf\n");
  CHECK(build_recipe(recipe_in(repo / "recipes", copying("../shared/app.conf")), store, o, null_status())
            .layers.size() == 1);
  // A recipe named without a directory (its base is "") is confined to the working directory.
  {
    const fs::path cwd = fs::current_path();
    fs::current_path(dir);
    CHECK_THROWS_WITH(build_recipe(load_recipe("recipe.yaml"), store, o, null_status()), Catch::Contains("outside"));
    fs::current_path(cwd);
  }
  // Asked for, a host file is copied.
  o.allow_host_paths = true;
  BuildResult host = build_recipe(recipe_in(dir, copying("/etc/passwd")), store, o, null_status());
  CHECK(host.layers.size() == 1);
}

TEST_CASE("source: path: and patches: read no host file outside the recipe's directory or repository",
          "[build][hostile]") {
  TempDir tmp;
  fs::path dir = tmp.path() / "recipes";
  test::write(dir / "base/bin/sh", "#!\n", 0755);
  test::write(dir / "src/Makefile", "all:\n");
  test::write(dir / "fix.patch", "");
  Store store(tmp.path() / "store");
  CacheSandbox fake;
  BuildOptions o = options_with(fake, tmp.path());
  auto compiled = [](const std::string& source, const std::string& patches) {
    return "stack: s\nlayers:\n  - {name: base, copy: [{src: base/, dst: /}]}\n"
           "  - {name: app, source: {path: " + source + "}, patches: [" + patches + "], build: {run: make}}\n";
  };
  // A host directory as the source tree (whose files the steps read and keep_source keeps),
  // directly or through a link; a host file as a patch (applied into the tree).
  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, compiled("/etc", "fix.patch")), store, o, null_status()),
                    Catch::Contains("recipe.yaml:4") && Catch::Contains("outside"));
  fs::create_directory_symlink("/root", dir / "home");
  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, compiled("home", "fix.patch")), store, o, null_status()),
                    Catch::Contains("outside"));
  CHECK_THROWS_WITH(build_recipe(recipe_in(dir, compiled("src", "/etc/passwd")), store, o, null_status()),
                    Catch::Contains("recipe.yaml:4") && Catch::Contains("outside"));
  CHECK(fake.runs.empty());  // no step ran

  // The recipe's own tree builds; --allow-host-paths lifts the check.
  CHECK(build_recipe(recipe_in(dir, compiled("src", "fix.patch")), store, o, null_status()).layers.size() == 2);
  o.allow_host_paths = true;
  test::write(tmp.path() / "elsewhere/Makefile", "all:\n");
  CHECK(build_recipe(recipe_in(dir, compiled((tmp.path() / "elsewhere").string(), "fix.patch")), store, o,
                     null_status())
            .layers.size() == 2);
}

namespace {

// An ar archive of `members` (name, bytes), as dpkg-deb writes a .deb.
void make_ar(const fs::path& out, const std::vector<std::pair<std::string, std::string>>& members) {
  std::string ar = "!<arch>\n";
  for (const auto& [name, data] : members) {
    char header[61];
    std::snprintf(header, sizeof header, "%-16s%-12d%-6d%-6d%-8s%-10zu`\n", name.c_str(), 0, 0, 0, "100644",
                  data.size());
    ar += std::string(header, 60) + data + (data.size() % 2 ? "\n" : "");
  }
  test::write(out, ar);
}

// A .deb whose data.tar holds `data`.
fs::path hostile_deb(const fs::path& dir, const std::vector<RawEntry>& data) {
  test::make_tar(dir / "control.tar", {{"control", 'f', "Package: x\nVersion: 1\nArchitecture: all\n"}});
  test::make_tar(dir / "data.tar", data);
  make_ar(dir / "x.deb", {{"debian-binary", "2.0\n"},
                          {"control.tar", test::slurp(dir / "control.tar")},
                          {"data.tar", test::slurp(dir / "data.tar")}});
  return dir / "x.deb";
}

}  // namespace

TEST_CASE("a .deb from a repository is read inside its staging directory, or refused with its name",
          "[apt][hostile]") {
  TempDir tmp;
  fs::path staging = tmp.path() / "staging";
  fs::create_directories(staging);
  auto staged = [&] { return files_below(staging); };

  // An honest one reads.
  apt::DebContents ok = apt::read_deb(hostile_deb(tmp.path(), {{"usr", 'd'}, {"usr/x", 'f', "x"}}), staging, 0);
  CHECK(ok.control.get("Package") == "x");
  CHECK(ok.entries.count("usr/x"));
  const size_t before = staged();

  // A path that climbs out, a hardlink to nothing before it: refused, naming the .deb.
  CHECK_THROWS_WITH(apt::read_deb(hostile_deb(tmp.path(), {{"../escape", 'f', "out"}}), staging, 0),
                    Catch::Contains("x.deb") && Catch::Contains(".."));
  CHECK_FALSE(fs::exists(tmp.path() / "escape"));
  CHECK_THROWS_WITH(apt::read_deb(hostile_deb(tmp.path(), {{"usr/a", 'h', "usr/missing"}}), staging, 0),
                    Catch::Contains("x.deb") && Catch::Contains("hardlink"));
  CHECK(staged() == before);

  // Not an ar archive; an ar archive without data.tar; a data.tar cut short.
  test::write(tmp.path() / "plain.deb", "not an archive");
  CHECK_THROWS_WITH(apt::read_deb(tmp.path() / "plain.deb", staging, 0), Catch::Contains("plain.deb: not a .deb"));
  make_ar(tmp.path() / "x.deb", {{"debian-binary", "2.0\n"}, {"control.tar", test::slurp(tmp.path() / "control.tar")}});
  CHECK_THROWS_WITH(apt::read_deb(tmp.path() / "x.deb", staging, 0), Catch::Contains("x.deb: not a .deb"));
  std::string big(1 << 16, 'b');
  hostile_deb(tmp.path(), {{"big", 'f', big}});
  std::string deb = test::slurp(tmp.path() / "x.deb");
  test::write(tmp.path() / "x.deb", deb.substr(0, deb.size() - 40000));
  CHECK_THROWS_WITH(apt::read_deb(tmp.path() / "x.deb", staging, 0), Catch::Contains("x.deb"));
}


// The Recipe: what a user declared, as plain values, every node with the
// place in the YAML it came from. recipe/ is the only stage that reads
// recipes; YAML types never leave it. The language is documented, key by key,
// in docs/recipes.md.
//
// load_recipe() reads a file and the chain of `extends:` parents, merges
// them (child keys win; layers and tests merge by name) and validates the
// result. Strings may hold `${var}` references (see variables.hpp); they are
// kept as written here and expanded per matrix point by resolve/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/error.hpp"

namespace sb {

namespace fs = std::filesystem;

// A string as written, with where it was written (for `${var}` errors).
struct Text {
  std::string value;
  SourceLocation where;
};

// One `copy:` item: a host path (relative to the recipe's directory) into the image.
struct CopySpec {
  std::string src;
  std::string dst;                       // absolute image path; ending in '/' means "into"
  std::optional<uint32_t> mode;          // forced permission bits for files
  fs::path base;                         // the directory `src` is relative to (its recipe's)
  SourceLocation where;
};

// A patch applied to a framework's source before it is built.
// `source:` of a layer: the tree its build steps compile (or, on a `use:`
// layer with `keep_source:` and no steps, the tree kept beside its packages),
// one of a local directory (`path`, relative to the recipe that names it), an
// archive pinned by sha256 (`url` + `sha256`), or a git repository at a ref
// (`git` + `ref`, a commit or a tag; both may use ${vars}), or a Debian
// source package (`debian` + optional `version` and `suite`, which may use
// ${vars}: from the machine's Debian repositories). Without it,
// `use: X` + `from: source` (or `keep_source:`) takes the catalog's source
// of X. See src/fetch/source/.
struct SourceDecl {
  std::string path, url, sha256, git, ref;
  std::string debian, version, suite;  // a Debian source package; version/suite "" = the newest/the machine's
  fs::path base;  // the directory `path` is relative to (its recipe's)
  SourceLocation where;
  bool given() const { return !path.empty() || !url.empty() || !git.empty() || !debian.empty(); }
};

struct PatchSpec {
  std::string path;  // as written, relative to the recipe that names it
  fs::path file;     // that recipe's directory joined with `path`
  SourceLocation where;
};

// `build:` steps of a layer, run in order in the sandbox (sandbox/, build/)
// on top of the layers below; what they change becomes the layer.
//
// `run` holds every word the steps are made of, in order, so that ${vars}
// expand over one flat list: a shell line is one word, an argv command is
// its words. `shape` says how they group: one entry a command, `argv` false
// for a shell line (run as /bin/sh -c LINE), true for an argv of `words` words.
struct RunShape {
  bool argv = false;
  size_t words = 1;
};

struct BuildSpec {
  std::vector<std::pair<std::string, Text>> env;
  std::vector<Text> run;
  std::vector<RunShape> shape;            // empty: every word of `run` is a shell line
  std::string workdir;                    // absolute image path; "" = /
  bool network = false;                   // the host's network (and resolv.conf) instead of none
  std::vector<std::string> cache;         // image paths kept between builds, outside the image
  // The `cache:` paths given as `{path: P, shared: NAME}`: P -> NAME. A cache
  // is the recipe's own (its stack's and layer's) unless it names a shared one.
  std::map<std::string, std::string> shared_caches;
  std::optional<uint32_t> uid, gid;       // `user: "UID[:GID]"`; default 0:0
  int64_t timeout = 0;                    // seconds per command; 0 = none
  bool empty() const { return env.empty() && run.empty(); }
  // The commands as argv vectors: a shell line becomes {"/bin/sh", "-c", line}.
  std::vector<std::vector<std::string>> commands() const;
};

// One `repositories:` item of a recipe or an apt layer (docs/apt.md): an apt
// repository, or `default` (the machine's apt configuration, else the public
// archives).
struct AptRepositorySpec {
  bool is_default = false;
  std::string url;                      // http://, https:// or file://, no trailing '/'
  std::vector<std::string> suites;      // empty: the layer's release (its codename)
  std::vector<std::string> components;  // default: main; with is_default, "" = the defaults' own
  std::string keyring;                  // as written; "" = the distribution's keyring
  fs::path keyring_file;                // `keyring` relative to the recipe that names it
  bool trusted = false;                 // no signature check (e.g. a local repository)
  bool check_valid_until = true;
  std::optional<int> priority;          // pin priority of the repository (apt's default 500)
  SourceLocation where;
};

// A `pins:` item: the repositories whose Release says `Origin: origin` get
// `priority` (a higher priority wins over a newer version).
struct AptPin {
  std::string origin;
  int priority = 500;
  SourceLocation where;
};

struct LayerSpec {
  std::string name;
  std::vector<CopySpec> copy;
  std::optional<uint32_t> uid, gid;      // owner of every entry; default 0:0
  bool preserve_modes = false;           // keep host modes instead of 0644/0755
  std::string comment;
  // Catalog components (`use:`) and their options.
  std::vector<std::string> use;          // component names, or an alias such as "debian"
  Text version;                          // "" = the resolver chooses; may use matrix ${vars}
  std::vector<std::string> components;   // parts of the component: cudart, cublas, nvcc, ...
  std::vector<std::string> packages;     // extra OS packages (with `use: <os>`)
  std::string from;                      // "", "redist", "wheel", "apt" or "source": which kind of source
  // In a recipe that extends another: a new layer goes directly under the
  // parent's layer of this name, not on top (cleared once placed).
  std::string below;
  std::string duplicates;                // "", report, lower, upper, error: a library a lower layer has too
  std::string compression;               // "": the build's; gzip, zstd, estargz, zstd:chunked or none
  std::string keep_source;               // image path where the source tree stays; may use ${vars}
  std::vector<PatchSpec> patches;        // applied to the source (from: source, or the kept source)
  SourceDecl source;                     // `source:`; given() false = none, or the catalog's
  bool configure = false;                // apt layers: run `dpkg --configure -a` in the sandbox
  // Tool layers and own build steps.
  std::vector<std::string> apt, pip;
  // Apt layers: where the packages come from, and what comes besides them.
  std::vector<AptRepositorySpec> repositories;  // empty: the recipe's
  std::vector<AptPin> pins;                     // over the recipe's, by origin
  bool recommends = false;                      // install Recommends too
  bool base = false;                            // a base system: Essential packages and apt
  std::string priority;                         // "", required, important or standard: that Priority and above
  BuildSpec build;
  SourceLocation where;
  std::map<std::string, SourceLocation> key_where;  // where each key given was written

  SourceLocation at(const std::string& key) const;  // the key's place, else the layer's
  bool copies() const { return !copy.empty(); }
  // Whether the build steps compile a source tree (`source:` or `from: source`).
  bool from_source() const { return (source.given() || from == "source") && !keeps_source_beside(); }
  // Whether the layer installs its `use:` component from packages (wheel,
  // redist, apt) and `keep_source:` asks for that component's source beside
  // it: the catalog record's source (or the layer's own `source:`), patched,
  // in a layer of its own directly above (pipeline/kept_source_layer.cpp).
  bool keeps_source_beside() const {
    return !keep_source.empty() && !use.empty() && from != "source" && build.empty();
  }
  // What the layer needs beyond local files: "" for a copy layer, else the
  // first of "use", "apt", "pip", "build".
  std::string needs() const;
};

// Whether a `use:` name is the OS (the catalog's `os`, or its aliases debian
// and ubuntu): an apt layer's base system.
bool is_os_component(const std::string& name);

struct ConfigSpec {
  std::vector<std::pair<std::string, Text>> env;  // in recipe order
  std::vector<std::string> entrypoint, cmd;
  std::string workdir, user, stop_signal;
  std::map<std::string, std::string> labels;
  std::vector<std::string> ports;
};

// A matrix value: one string, or (for `arch`) a list of compute capabilities.
struct MatrixValue {
  std::vector<std::string> items;
  bool is_list = false;
  SourceLocation where;

  std::string str() const;  // "12.6", or "8.0;9.0" for a list
  friend bool operator==(const MatrixValue& a, const MatrixValue& b) {
    return a.items == b.items && a.is_list == b.is_list;
  }
};

struct MatrixAxis {
  std::string key;  // a component name (cuda), arch, or a variable of the recipe's own
  std::vector<MatrixValue> values;
  SourceLocation where;
};

// One `include:` or `exclude:` entry: values for some of the keys.
struct MatrixCombo {
  std::vector<std::pair<std::string, MatrixValue>> values;
  SourceLocation where;
};

struct Matrix {
  std::vector<MatrixAxis> axes;  // in recipe order; the first varies slowest
  std::vector<MatrixCombo> include, exclude;

  bool empty() const { return axes.empty() && include.empty(); }
  const MatrixAxis* find(const std::string& key) const;
};

struct TestSpec {
  std::string name;
  Text run;          // a shell command, run in the image
  bool gpu = false;  // needs a GPU; skipped (never passed) without one
  Text expect;       // text its output must contain; "" = only the exit status counts
  int exit = 0;      // the exit status it must end with (`exit:`, 0-255)
  int64_t timeout = 0;  // seconds before it is killed and failed; 0 = the default (600)
  SourceLocation where;
};

// `builtin_tests:` the tests stackbuild adds for the catalog components an
// image has (verify/builtin_tests.hpp): all on by default; `false` turns all
// off, a map {cuda: false, ...} turns off some.
struct BuiltinTestsSpec {
  bool enabled = true;
  std::map<std::string, bool> components;  // component -> on/off, as written
  std::map<std::string, SourceLocation> where;
  bool on(const std::string& component) const {
    auto it = components.find(component);
    return enabled && (it == components.end() || it->second);
  }
};

// `static_checks:` known gaps in vendors' binaries that `stackbuild test`
// lets through: globs of image paths (util/glob.hpp) whose files are exempt
// from a static check. An exempt file is still checked; what it lacks is
// reported as ignored, never as passed. Recorded in the tests label.
struct StaticChecksSpec {
  std::vector<std::string> arch_ignore;       // from "CUDA code for every requested arch"
  std::vector<std::string> libraries_ignore;  // from "libraries resolve"
  std::map<std::string, SourceLocation> where;  // key -> where written
  bool empty() const { return arch_ignore.empty() && libraries_ignore.empty(); }
};

// `platform:` what the image's Python and glibc are, for pip layers in an
// image without an os layer to say it.
struct PlatformSpec {
  std::string python, glibc;  // "" = not said
  SourceLocation where;
};

// `cluster:` what each point's task asks of a scheduler (`stackbuild cluster
// slurm`: --cpus-per-task, --mem, --time, --partition, --gres=gpu:N). Not
// part of any image: no digest depends on it. Unset fields are the scheduler's
// defaults; gpus unset means one GPU when a test needs it (gpu: true), else none.
struct ClusterSpec {
  std::optional<int64_t> cpus;
  std::string memory;     // "32G", "4000M" (Slurm's --mem)
  std::string time;       // "4:00:00", "1-12:00:00", "90" (Slurm's --time)
  std::string partition;
  std::optional<int64_t> gpus;
  SourceLocation where;
};
// The platforms a recipe builds for (`architecture:`, matrix key `platform`):
// OCI's "linux/amd64" and "linux/arm64". Whether `platform` is one, and its
// architecture ("linux/arm64" -> "arm64"; "" when it is none).
inline constexpr const char* kPlatforms[] = {"linux/amd64", "linux/arm64"};
std::string platform_architecture(const std::string& platform);

struct Recipe {
  fs::path file;                          // as given on the command line
  std::vector<fs::path> extends_chain;    // the parents read, nearest first
  std::string stack;
  std::string release;                    // ${release}; "" = not set
  std::string architecture = "amd64";     // OCI name: amd64, arm64, ...
  std::optional<int64_t> source_date_epoch;
  // `from:` at the top of a recipe: the base image whose layers go below the
  // recipe's (pipeline/base_image.hpp): REGISTRY/REPO[:TAG][@DIGEST] or
  // oci:PATH[:TAG][@DIGEST]. Not the layer-level `from:` (source, wheel).
  Text from;
  fs::path from_dir;                      // the directory of the recipe that wrote it (oci: paths)
  std::optional<uint64_t> layer_budget;   // bytes of content above which a layer is split
  // `pip_constraint: false`: no /etc/pip/constraint.txt (and no PIP_CONSTRAINT)
  // pinning the Python packages of an image with pip layers.
  bool pip_constraint = true;
  Matrix matrix;
  PlatformSpec platform;
  std::vector<LayerSpec> layers;
  ConfigSpec config;
  std::map<std::string, std::string> annotations;  // title, version, source, revision, description
  std::vector<std::string> tags;
  std::vector<SourceLocation> tag_where;  // one per tag
  SourceLocation tags_where;
  std::vector<Text> push;                 // registry references to push each image to
  std::vector<TestSpec> tests;
  BuiltinTestsSpec builtin_tests;
  StaticChecksSpec static_checks;
  ClusterSpec cluster;                    // `cluster:`, for the scheduler a fan-out runs on
  std::vector<AptRepositorySpec> repositories;  // apt layers' repositories; empty: the defaults
  std::vector<AptPin> pins;
  std::map<std::string, SourceLocation> key_where;  // where each top-level key was written

  fs::path dir() const { return file.parent_path(); }
  // Whether any layer needs the catalog (use:, apt:, pip:, build:).
  bool needs_components() const;
};

// The components that have built-in tests: cuda, cublas, cudnn, nccl,
// pytorch, jax, tensorflow (the names `builtin_tests:` accepts).
const std::vector<std::string>& builtin_test_components();

// Parses and validates a recipe file and its `extends:` parents. Throws
// sb::InputError at file:line:col.
Recipe load_recipe(const fs::path& file);
// The same for text in memory; `extends:` paths are read from disk, relative
// to `file`'s directory.
Recipe parse_recipe(const std::string& text, const fs::path& file);

void to_json(nlohmann::json& j, const Recipe& r);
void to_json(nlohmann::json& j, const LayerSpec& l);
void to_json(nlohmann::json& j, const MatrixValue& v);
void to_json(nlohmann::json& j, const AptRepositorySpec& r);
void to_json(nlohmann::json& j, const AptPin& p);

}  // namespace sb

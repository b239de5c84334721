// The same shared library in two layers of one image (libcublas.so.12 from a
// CUDA layer and again from a torch wheel's nvidia-cublas-cu12; cuDNN from a
// redist layer and from an apt package): found for every kind of layer as
// it is written, reported, and resolved as the layer's `duplicates:` policy
// says. See docs/layers.md, "Duplicate libraries".
//
// "The same library" is the same soname family: libNAME.so.MAJOR (libNAME.so
// when unversioned), taken from the ELF DT_SONAME of the layer being written
// and from the file names of the layers below (whose bytes are not read
// again). Only ELF regular files count; stubs/ directories (link-time stubs)
// and a file at the same path as the lower one (an overwrite) do not.
// Versions come from the file name (libcublas.so.12.6.4.1), else from the
// wheel whose RECORD lists the file (nvidia-cublas-cu12 12.6.4.1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layer/layer.hpp"
#include "layer/tree.hpp"
#include "recipe/recipe.hpp"
#include "store/store.hpp"
#include "util/status.hpp"

namespace sb {

enum class DuplicatePolicy {
  Report,  // warn (the default)
  Lower,   // the upper copy becomes a symlink to the lower one
  Upper,   // the lower path becomes a symlink to the upper copy (saves no bytes)
  Error,   // fail the build
};

// "report" | "lower" | "upper" | "error"; throws sb::Error naming `what` otherwise.
DuplicatePolicy parse_duplicate_policy(const std::string& text, const std::string& what);
std::string to_string(DuplicatePolicy p);

// The policy of `spec`: its `duplicates:` key, else STACKBUILD_DUPLICATE_LIBRARIES, else report.
DuplicatePolicy duplicate_policy(const LayerSpec& spec);

// libcublas.so.12.6.4.1 -> {"libcublas.so.12", "12.6.4.1"}; libfoo.so -> {"libfoo.so", ""};
// nullopt when the name is not a shared library's (libX.so[.N...]).
struct LibraryName {
  std::string soname;   // the family: libNAME.so.MAJOR
  std::string version;  // all the numbers after .so, "" when there are none or only the major
};
std::optional<LibraryName> library_name(const std::string& file_name);

// One copy of a library in a layer.
struct LibraryCopy {
  std::string layer;         // the layer's name in the report
  std::string path;          // image path, no leading '/'
  std::string soname;        // the family
  std::string version;       // "12.6.4.1", "" unknown
  std::string version_from;  // "file name", "wheel nvidia-cublas-cu12 12.6.4.1"
  uint64_t bytes = 0;
};
void to_json(nlohmann::json& j, const LibraryCopy& c);
void from_json(const nlohmann::json& j, LibraryCopy& c);

// What a written layer means for the libraries below it.
struct LibraryListing {
  std::vector<LibraryCopy> copies;   // ELF regular files with a library name
  std::vector<std::string> shadows;  // other entries at a library-named path (symlinks, dirs)
  std::vector<std::string> removed;  // whiteouts: paths removed below
  std::vector<std::string> opaque;   // directories whose lower contents are hidden
};

// The listing of a layer blob (tar, gzip or zstd), remembered in the store by the blob's digest.
LibraryListing library_listing(const Store& store, const Layer& layer);

// The copies visible in the image made of `layers` (bottom first), as each
// layer's whiteouts and entries leave them; `names` names each layer.
std::vector<LibraryCopy> visible_libraries(const Store& store, const std::vector<Layer>& layers,
                                           const std::vector<std::string>& names);

// The library copies of entries about to become the layer `layer`
// (DT_SONAME read from each file's host source).
std::vector<LibraryCopy> entry_libraries(const std::string& layer, const EntryMap& entries);

struct DuplicateLibrary {
  LibraryCopy lower, upper;
  std::string
      action;  // "reported", "linked to the lower copy", "lower path linked to the upper copy"
  uint64_t saved = 0;  // bytes the image no longer holds twice
};
void to_json(nlohmann::json& j, const DuplicateLibrary& d);
void from_json(const nlohmann::json& j, DuplicateLibrary& d);

// Pairs each upper copy with the topmost lower copy of its soname family.
std::vector<DuplicateLibrary> find_duplicates(const std::vector<LibraryCopy>& lower,
                                              const std::vector<LibraryCopy>& upper);

// -1, 0, 1 comparing dotted versions on the components both give ("9.1.0" == "9.1.0.70");
// nullopt when either is unknown.
std::optional<int> compare_library_versions(const std::string& a, const std::string& b);

// Applies `policy` to `entries` (Lower: upper files become relative symlinks
// to the lower copy; Upper: symlinks at the lower paths to the upper copy are
// added; Error: throws), filling in each duplicate's action and saving.
// Lower refuses (sb::Error) when the lower copy is older than the upper one,
// Upper when the upper copy is older: the other layer's programs may need
// what the newer one added within the soname.
void apply_duplicate_policy(DuplicatePolicy policy, const std::string& layer,
                            std::vector<DuplicateLibrary>& dups, EntryMap& entries);

// The whole step for a layer about to be written on a cache miss: finds the
// duplicates of `entries` against `below`, applies the layer's policy, and
// records them in the store under the layer's cache key `key` (read back by
// duplicates_of, so that a cached layer reports them again).
void check_duplicate_libraries(const LayerSpec& spec, const std::vector<Layer>& below,
                               const std::vector<std::string>& below_names, const Store& store,
                               EntryMap& entries, const Digest& key);
std::vector<DuplicateLibrary> duplicates_of(const Store& store, const Digest& key);
// The key of the "duplicate-libraries" record of the layer whose cache key is `layer_key`.
Digest findings_key(const Digest& layer_key);

// "libcublas.so.12: layer torch /usr/lib/.../libcublas.so.12 (12.6.4.1, wheel ..., 700 MiB) is a
// second copy of layer cuda /usr/local/cuda-12.6/lib64/libcublas.so.12.6.4.1 (12.6.4.1, file name,
// 700 MiB); ..."
std::string describe(const DuplicateLibrary& d);

// What became of it: the action, or for a reported one what a policy would do
// ("`duplicates: lower` would save 700 MiB").
std::string duplicate_outcome(const DuplicateLibrary& d);

// The build's summary line: how many second copies, the bytes saved and the bytes still stored
// twice.
std::string duplicate_summary(const std::vector<DuplicateLibrary>& dups);

}  // namespace sb

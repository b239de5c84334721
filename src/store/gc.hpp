// The store's garbage collector (`stackbuild gc`): what the store holds
// (scan), what of it to remove (plan: a pure function of the scan, so the
// selection is tested without a file system) and the removal (apply).
//
// What is garbage for sure: unpacked roots (roots/, rootfs/: made again from
// the blobs when needed), temporary files and lock files (gc runs with the
// store locked exclusively, so no process owns them), records that name a blob
// that is gone or that do not parse, and blobs that no kept record names
// (directly, or through a manifest blob a record names). With limits, records
// and the build caches, logs and compiled test programs are evicted too:
// those unused for longer than `older_than`, then the least recently used
// until the store fits `max_size`; a blob goes with the last record naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace sb::gc {

enum class Kind { Root, Rootfs, Temp, Lock, Record, Blob, Cache, Log, Builtin };
inline constexpr Kind kKinds[] = {Kind::Root, Kind::Rootfs, Kind::Temp,  Kind::Lock,   Kind::Record,
                                  Kind::Blob, Kind::Cache,  Kind::Log,   Kind::Builtin};
// "roots", "rootfs", "tmp", "locks", "records", "blobs", "cache", "logs", "builtin-tests"
const char* kind_name(Kind k);

struct Item {
  Kind kind = Kind::Temp;
  std::string path;   // relative to the store root: "refs/layer/<hex>", "roots/<hex>"
  uint64_t bytes = 0; // on disk (st_blocks), a hard-linked file counted once
  int64_t used = 0;   // last use: the mtime, in seconds since the epoch
  std::optional<Digest> digest;  // a blob's
  std::vector<Digest> needs;     // a record's blobs, without which it is useless
  std::vector<Digest> refs;      // the blobs a record or a manifest blob names (needs included)
  bool corrupt = false;          // a record of a known kind that does not parse
  bool linked = false;           // a blob with other hard links (an OCI layout's): removing it frees no disk
};

struct Scan {
  std::vector<Item> items;
  uint64_t other_bytes = 0;  // what gc does not own: store.lock, files it does not know
};

struct Options {
  std::optional<uint64_t> max_size;    // evict least recently used until the store is at most this
  std::optional<int64_t> older_than;   // seconds: evict what was not used for this long
  bool roots_only = false;             // remove the unpacked roots only
  bool all = false;                    // remove everything
  int64_t now = 0;                     // seconds since the epoch
};

enum class Why { Unpacked, Temporary, Dangling, Unreferenced, Old, LeastRecent, All };
const char* why_name(Why w);

struct Plan {
  struct Removal {
    size_t item;  // index into Scan::items
    Why why;
  };
  std::vector<Removal> remove;  // records before blobs before the rest
  uint64_t before = 0;          // the store's size, scanned
  uint64_t after = 0;           // its size once the plan is applied
};

// The digests a record of `kind` needs and names; `corrupt` when it is of a
// known kind and does not parse. Unknown kinds need nothing (never dangling)
// but keep every blob their text names.
void read_record(std::string_view kind, std::string_view text, Item& item);
// Every "sha256:<64 hex>" in `text`.
std::vector<Digest> digests_in(std::string_view text);

Scan scan(const Store& store);
Plan plan(const Scan& scan, const Options& o);
// Removes what `plan` names. Directories are renamed into tmp/ first, so an
// interrupted gc never leaves a half-removed root that looks whole.
void apply(const Store& store, const Scan& scan, const Plan& plan);

}  // namespace sb::gc

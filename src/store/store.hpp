// The content-addressed store: blobs/sha256/<hex> under a cache directory,
// plus small records (refs/<kind>/<key>) that map cache keys to blobs.
//
// A blob enters only through a Writer, which hashes what it writes and renames
// the temporary file into place once the digest is known (and, when one was
// expected, matches). Readers therefore never see a partial or wrong blob, and
// two stackbuild processes sharing a store can insert the same blob at once.
// Work that should happen once across processes takes a lock() first.
//
// The store is private: its root and every directory it makes are 0700, and
// opening an older store tightens its root (DESIGN.md, "Trust boundary").
//
// Every Store holds a shared lock on <root>/store.lock for its lifetime
// (copies share it); `stackbuild gc` takes it exclusively, so it never
// removes anything while another stackbuild uses the store (store/gc.hpp).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/digest.hpp"
#include "util/direct_write.hpp"
#include "util/file.hpp"

namespace sb {

class Store {
 public:
  // Called with the pids holding the store (empty when unknown) before
  // blocking on them.
  using WaitFn = std::function<void(const std::vector<long>& pids)>;

  // Opens (creating) the store and takes its shared lock; blocks while a gc
  // holds it, calling `on_wait` first.
  explicit Store(fs::path root, const WaitFn& on_wait = {});
  // The store with every other user shut out, for gc: nullopt while another
  // process holds it, unless `wait`, which blocks (calling `on_wait`) until
  // it is free.
  static std::optional<Store> open_exclusive(fs::path root, bool wait, const WaitFn& on_wait = {});
  // The processes holding <root>/store.lock now, besides this one.
  static std::vector<long> users(const fs::path& root);
  // $XDG_CACHE_HOME/stackbuild, else $HOME/.cache/stackbuild.
  static fs::path default_root();

  const fs::path& root() const { return root_; }
  fs::path blob_path(const Digest& d) const;
  bool has(const Digest& d) const;
  uint64_t size(const Digest& d) const;

  // Streams a new blob in. commit() checks `expected` (when given), then moves
  // the blob into place and returns its digest. Dropped uncommitted: no trace.
  // Large blobs go to the disk with direct I/O where the filesystem does it
  // well (util/direct_write.hpp).
  class Writer {
   public:
    void write(const void* data, size_t size);
    void write(std::string_view s) { write(s.data(), s.size()); }
    uint64_t bytes_written() const { return size_; }
    Digest commit(const std::optional<Digest>& expected = std::nullopt);
    bool wrote_direct() const { return out_.wrote_direct(); }

   private:
    friend class Store;
    Writer(const Store& store, fs::path temp_name);
    const Store& store_;
    AtomicFile file_;
    DirectWriter out_;  // writes to file_
    Sha256 sha_;
    uint64_t size_ = 0;
  };
  Writer writer() const;

  Digest put(std::string_view bytes, const std::optional<Digest>& expected = std::nullopt) const;
  Digest put_file(const fs::path& src, const std::optional<Digest>& expected = std::nullopt) const;
  std::string read(const Digest& d) const;  // re-checks the digest

  // Small JSON records keyed by a cache key, e.g. ("layer", key) -> Layer.
  // Reading a record sets its mtime to now: gc evicts the least recently
  // used records first (touch_record does only that, and says whether the
  // record exists).
  std::optional<std::string> get_record(std::string_view kind, const Digest& key) const;
  void put_record(std::string_view kind, const Digest& key, std::string_view json) const;
  bool touch_record(std::string_view kind, const Digest& key) const;

  // An exclusive inter-process lock on a name, e.g. "layer-<key>".
  std::unique_ptr<FileLock> lock(std::string_view name) const;

  // A scratch directory inside the store (same filesystem as the blobs).
  std::unique_ptr<TempDir> temp_dir() const;

  // <root>/<rel>, made (each missing directory 0700) if it is not there.
  fs::path private_dir(const fs::path& rel) const;

 private:
  Store(fs::path root, std::shared_ptr<FileLock> use) : root_(std::move(root)), use_(std::move(use)) {}
  static void create_layout(const fs::path& root);
  fs::path root_;
  std::shared_ptr<FileLock> use_;  // on <root>/store.lock: shared, or exclusive for gc
};

}  // namespace sb

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "archive/extract.hpp"
#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::cli {

using json = nlohmann::json;

const char* const kUnpackHelp =
    "usage: stackbuild unpack LAYOUT[:REF] DIR [options]\n"
    "\n"
    "Unpacks the image named REF (an org.opencontainers.image.ref.name; optional when the\n"
    "layout holds one image) from the OCI layout LAYOUT into DIR, which must not exist.\n"
    "Layers are applied with the safe extractor (whiteouts honoured; traversal, escaping\n"
    "symlinks and hardlinks, duplicates and devices refused) while their digests are checked;\n"
    "DIR appears only when the whole image unpacked and every blob matched its digest. A\n"
    "REF that names an image index (a tag over several platforms) gives the image for\n"
    "--platform.\n"
    "\n"
    "options:\n"
    "  --platform OS/ARCH       the image to take from an index (default: this machine's)\n"
    "  --allow-devices          create device nodes (needs root)\n"
    "  --preserve-owner         chown entries to their uid/gid (needs root)\n"
    "  --max-size BYTES         refuse images that unpack to more (default 64 GiB)\n";

const char* const kExtractHelp =
    "usage: stackbuild extract DIR BLOB... [options]\n"
    "\n"
    "Applies layer blobs (tar, tar+gzip or tar+zstd), in order, onto DIR (created if missing),\n"
    "with the safe extractor: whiteouts and opaque directories are honoured; '..', absolute\n"
    "paths, writes or links through symlinks that leave DIR, duplicate entries and (unless\n"
    "allowed) devices are refused with an error, and nothing is written outside DIR.\n"
    "\n"
    "options:\n"
    "  --allow-devices          create device nodes (needs root)\n"
    "  --preserve-owner         chown entries to their uid/gid (needs root)\n"
    "  --max-size BYTES         refuse layers that unpack to more (default 64 GiB)\n"
    "  --max-entries N          refuse layers with more entries (default 10000000)\n";

static ExtractOptions extract_options(const Args& args) {
  ExtractOptions o;
  o.allow_devices = args.has("--allow-devices");
  o.preserve_owner = args.has("--preserve-owner");
  if (auto m = args.integer("--max-size", 0, INT64_MAX)) o.max_bytes = static_cast<uint64_t>(*m);
  if (auto m = args.integer("--max-entries", 0, INT64_MAX)) o.max_entries = static_cast<uint64_t>(*m);
  return o;
}

// What was written: a line on stderr, or with --json an event on stdout.
static void report(const Args& args, const std::string& what, const ExtractStats& stats, const fs::path& dir) {
  if (args.has("--json")) {
    make_context(args).status->event(what, {{"entries", stats.entries}, {"bytes", stats.bytes}, {"into", dir.string()}});
    return;
  }
  fprintf(stderr, "%s %llu entries, %llu bytes into %s\n", what.c_str(), (unsigned long long)stats.entries,
          (unsigned long long)stats.bytes, dir.c_str());
}

static std::vector<std::string> extract_flags() {
  std::vector<std::string> f = kCommonFlags;
  f.insert(f.end(), {"--allow-devices", "--preserve-owner"});
  return f;
}

static std::vector<std::string> extract_opts() {
  std::vector<std::string> o = kCommonOptions;
  o.insert(o.end(), {"--max-size", "--max-entries"});
  return o;
}

int cmd_extract(const std::vector<std::string>& argv) {
  Args args(argv, extract_flags(), extract_opts());
  if (maybe_help(args, kExtractHelp)) return kExitOk;
  if (args.positional().size() < 2) throw Error("extract wants a directory and at least one layer blob", ErrorKind::Usage);
  fs::path dir = args.positional()[0];
  fs::create_directories(dir);
  ExtractOptions o = extract_options(args);
  ExtractStats stats;
  std::vector<fs::path> blobs(args.positional().begin() + 1, args.positional().end());
  extract_layers(blobs, dir, o, stats);
  report(args, "extracted", stats, dir);
  return kExitOk;
}

// Hashes an image's layer blobs, in order, on a thread of its own (on the
// caller's when the system refuses one: check() then hashes).
class LayerHashes {
 public:
  LayerHashes(std::vector<fs::path> blobs, std::vector<Digest> digests)
      : blobs_(std::move(blobs)), digests_(std::move(digests)), errors_(blobs_.size()), done_(blobs_.size(), false) {
    try {
      thread_ = std::thread([this] {
        for (size_t i = 0; i < blobs_.size(); ++i) {
          std::string error = hash(i);
          std::lock_guard lk(mu_);
          if (stop_) return;
          errors_[i] = std::move(error);
          done_[i] = true;
          cv_.notify_all();
        }
      });
    } catch (const std::system_error&) {
    }
  }
  ~LayerHashes() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  // Throws the digest error of layer i, once it is hashed.
  void check(size_t i) {
    std::string error;
    if (!thread_.joinable()) {
      error = hash(i);
    } else {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return done_[i]; });
      error = errors_[i];
    }
    if (!error.empty()) throw Error(error);
  }

 private:
  std::string hash(size_t i) const {
    try {
      check_blob_digest(blobs_[i], digests_[i]);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  const std::vector<fs::path> blobs_;
  const std::vector<Digest> digests_;
  std::vector<std::string> errors_;
  std::vector<bool> done_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

int cmd_unpack(const std::vector<std::string>& argv) {
  std::vector<std::string> opts = extract_opts();
  opts.push_back("--platform");
  Args args(argv, extract_flags(), opts);
  if (maybe_help(args, kUnpackHelp)) return kExitOk;
  if (args.positional().size() != 2) throw Error("unpack wants LAYOUT[:REF] and DIR", ErrorKind::Usage);
  auto [layout, ref] = split_layout_ref(args.positional()[0]);
  fs::path dest = args.positional()[1];
  if (fs::exists(fs::symlink_status(dest))) throw Error(dest.string() + " already exists", ErrorKind::Usage);
  // The layers' digests are checked while they are extracted, on a thread
  // of their own, into a directory that goes unless every one matched.
  LayoutImage image =
      open_layout_image(layout, ref, nullptr, args.get("--platform").value_or(""), LayerDigests::LeftToCaller);
  LayerHashes hashes(image.layer_blobs, image.layer_digests);

  fs::create_directories(dest.parent_path().empty() ? "." : dest.parent_path());
  TempDir tmp(dest.parent_path().empty() ? fs::path(".") : dest.parent_path(), "." + dest.filename().string() + ".tmp-");
  fs::path root = tmp.path() / "rootfs";
  fs::create_directory(root);
  ExtractOptions o = extract_options(args);
  ExtractStats stats;
  // A blob that is not what its descriptor says: that is the error.
  extract_layers(image.layer_blobs, root, o, stats, [&](size_t i) { hashes.check(i); });
  for (size_t i = 0; i < image.layer_blobs.size(); ++i) hashes.check(i);
  fs::rename(root, dest);
  report(args, "unpacked", stats, dest);
  return kExitOk;
}

}  // namespace sb::cli

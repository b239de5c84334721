#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "layer/write.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/number.hpp"

namespace sb::cli {

const char* const kLayerHelp =
    "usage: stackbuild layer DIR [options]\n"
    "\n"
    "Writes the canonical layer of everything under DIR into the store and prints its\n"
    "diff_id, digest and size as JSON. Host modes and owners are kept (uid/gid are 0 unless\n"
    "--preserve-owner); mtimes are clamped to the source date epoch.\n"
    "\n"
    "options:\n"
    "  --compression ALGO       gzip (default), zstd, estargz, zstd:chunked (layers that clients\n"
    "                           can fetch file by file; docs/layers.md) or none\n"
    "  --level N                gzip, estargz 0-3 (default 2); zstd, zstd:chunked 1-19 (default 3)\n"
    "  -j, --jobs N             compression threads (default: one per core)\n"
    "  --source-date-epoch N    default $SOURCE_DATE_EPOCH, else 0\n"
    "  --preserve-owner         keep the host's uid/gid\n"
    "  --overlay                read DIR as an overlayfs upper directory (whiteouts, opaque dirs)\n"
    "  -o, --output FILE        also copy the blob to FILE\n";

int cmd_layer(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--preserve-owner", "--overlay"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--compression", "--level", "-j", "--jobs", "--source-date-epoch", "-o", "--output"});
  Args args(argv, flags, options);
  if (maybe_help(args, kLayerHelp)) return kExitOk;
  if (args.positional().size() != 1) throw Error("layer wants one directory", ErrorKind::Usage);
  fs::path dir = args.positional()[0];
  if (!fs::is_directory(dir)) throw Error(dir.string() + " is not a directory", ErrorKind::Usage);

  Context ctx = make_context(args);
  LayerOptions lo;
  lo.compression = parse_compression(args.get("--compression").value_or("gzip"));
  if (auto level = args.integer("--level", 0, 22)) lo.level = static_cast<int>(*level);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  if (jobs) lo.threads = static_cast<int>(*jobs);

  ScanOptions so;
  if (auto e = args.integer("--source-date-epoch", 0, INT64_MAX)) {
    so.source_date_epoch = *e;
  } else if (const char* env = getenv("SOURCE_DATE_EPOCH"); env && *env) {
    auto epoch = parse_integer<int64_t>(env);
    if (!epoch || *epoch < 0) throw Error(std::string("SOURCE_DATE_EPOCH='") + env + "' is not a number of seconds", ErrorKind::Usage);
    so.source_date_epoch = *epoch;
  }
  so.preserve_owner = args.has("--preserve-owner");
  so.overlay_whiteouts = args.has("--overlay");

  Store store = ctx.store();
  auto start = std::chrono::steady_clock::now();
  EntryMap entries;
  scan_tree(dir, "", so, entries);
  link_hardlinks(entries);
  int task = ctx.status->task_begin("layer " + dir.string(), content_bytes(entries));
  LayerStages stages;
  Layer l = write_layer(entries, store, lo, [&](uint64_t done) { ctx.status->task_progress(task, done); }, &stages);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.status->task_end(task, l.digest.str() + "; " + stages.summary() + "; bound by " + stages.bound_by());
  if (auto out = args.get("-o") ? args.get("-o") : args.get("--output")) {
    fs::path dest = *out;
    fs::remove(dest);
    if (::link(store.blob_path(l.digest).c_str(), dest.c_str()) != 0) fs::copy_file(store.blob_path(l.digest), dest);
  }
  nlohmann::json j = l;
  j["seconds"] = secs;
  j["entries"] = entries.size();
  j["stages"] = {{"wall", stages.wall},
                 {"tar", stages.tar},
                 {"diff_hash", stages.diff_hash},
                 {"compress", stages.compress},
                 {"compress_threads", stages.compress_threads},
                 {"blob", stages.blob},
                 {"bound_by", stages.bound_by()}};
  print_document(j, args.has("--json"));
  return kExitOk;
}

}  // namespace sb::cli

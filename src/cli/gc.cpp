#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "store/gc.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kGcHelp =
    "usage: stackbuild gc [--max-size SIZE] [--older-than DURATION] [--roots | --all] [--dry-run]\n"
    "                     [--wait] [--json] [--store DIR]\n"
    "\n"
    "Removes from the store what no build needs. With no limit it removes only garbage:\n"
    "images unpacked by 'stackbuild test' and 'run' (roots/) and layer stacks unpacked for\n"
    "build steps (rootfs/), all made again from the blobs when needed; temporary and lock\n"
    "files; records that name a blob that is gone; and blobs that no record names (built\n"
    "layers, downloads and base images each have a record, so they stay cached).\n"
    "\n"
    "With a limit it also evicts cache records (a built layer, a download, a pulled base\n"
    "image), build-step caches (cache/), build logs (logs/) and compiled test programs\n"
    "(builtin-tests/), and with a record the blobs no kept record names. Reading a record\n"
    "marks it used; gc evicts the least recently used first.\n"
    "\n"
    "gc takes the store for itself: while another stackbuild uses the store it refuses\n"
    "(exit 1), naming the processes, unless --wait; a build started while gc runs waits\n"
    "for it. Images written to OCI layouts are not affected: their blobs are hard links\n"
    "(or copies), which outlive the store's.\n"
    "\n"
    "options:\n"
    "  --max-size SIZE        then evict, least recently used first, until the store is at\n"
    "                         most SIZE (e.g. 20G, 500MiB; K/M/G/T are powers of 1024)\n"
    "  --older-than DURATION  then evict what was not used for DURATION: a number and a unit,\n"
    "                         s, m, h, d or w (e.g. 12h, 7d)\n"
    "  --roots                remove the unpacked roots (roots/, rootfs/) and nothing else\n"
    "  --all                  remove everything: an empty store\n"
    "  --dry-run              print what would be removed; remove nothing\n"
    "  --wait                 wait for the stackbuild processes using the store to finish\n"
    "  --json                 print the summary as one JSON document on stdout\n"
    "  -v, --verbose          list each thing removed, and why\n"
    "Sizes are disk usage, as du counts it. Also takes the options of every command\n"
    "(stackbuild --help).\n";

// "7d", "12h", "90m", "30s", "2w" -> seconds.
static int64_t parse_duration(const std::string& flag, const std::string& text) {
  auto bad = [&] {
    return Error(flag + " wants a duration, a whole number and a unit (s, m, h, d or w), e.g. 12h or 7d; not '" +
                     text + "'",
                 ErrorKind::Usage);
  };
  if (text.size() < 2) throw bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: throw bad();
  }
  std::string num = text.substr(0, text.size() - 1);
  if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos) throw bad();
  return std::stoll(num) * unit;
}

// A store is a folder with blobs/sha256, refs and locks: gc never cleans a folder that is not one.
static void check_is_store(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw Error("no store at " + root.string() + " (not a directory); nothing to collect");
  for (const char* sub : {"blobs/sha256", "refs", "locks"})
    if (!fs::is_directory(root / sub, ec))
      throw Error(root.string() + " is not a stackbuild store (it has no " + sub +
                  "/); gc removes nothing from it");
}

int cmd_gc(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--roots", "--all", "--dry-run", "--wait"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--max-size", "--older-than"});
  Args args(argv, flags, options);
  if (maybe_help(args, kGcHelp)) return kExitOk;
  if (!args.positional().empty())
    throw Error("gc takes no arguments, not '" + args.positional().front() + "'", ErrorKind::Usage);

  gc::Options o;
  o.now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (auto s = args.get("--max-size")) {
    o.max_size = parse_bytes(*s);
    if (!o.max_size)
      throw Error("--max-size wants a size, e.g. 20G or 500MiB (K/M/G/T are powers of 1024), not '" + *s + "'",
                  ErrorKind::Usage);
  }
  if (auto d = args.get("--older-than")) o.older_than = parse_duration("--older-than", *d);
  o.roots_only = args.has("--roots");
  o.all = args.has("--all");
  if (o.all && o.roots_only) throw Error("--all and --roots do not go together: --all removes the roots too", ErrorKind::Usage);
  for (const char* mode : {"--all", "--roots"})
    for (const char* limit : {"--max-size", "--older-than"})
      if (args.has(mode) && args.has(limit))
        throw Error(std::string(mode) + " and " + limit + " do not go together: " + mode +
                        (std::string(mode) == "--all" ? " removes everything" : " removes the unpacked roots only"),
                    ErrorKind::Usage);
  const bool dry = args.has("--dry-run"), json_out = args.has("--json"), verbose = args.has("-v") || args.has("--verbose");

  Context ctx = make_context(args);
  if (json_out && !args.get("--progress")) ctx.status = make_status(StatusMode::Plain, stderr, verbose);
  check_is_store(ctx.store_root);
  auto start = std::chrono::steady_clock::now();
  std::optional<Store> store = Store::open_exclusive(ctx.store_root, args.has("--wait"), [&](const std::vector<long>& pids) {
    ctx.status->message(Level::Info, "waiting for the stackbuild processes using the store" + pid_list(pids) + " to finish");
  });
  if (!store)
    throw Error("the store " + ctx.store_root.string() + " is in use by another stackbuild" +
                pid_list(Store::users(ctx.store_root)) + "; try again when it has finished, or pass --wait");

  gc::Scan scan = gc::scan(*store);
  gc::Plan plan = gc::plan(scan, o);
  if (!dry) gc::apply(*store, scan, plan);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  struct Total {
    size_t count = 0;
    uint64_t bytes = 0, linked = 0;
  };
  std::map<gc::Kind, Total> totals;
  Total all;
  for (const auto& r : plan.remove) {
    const gc::Item& it = scan.items[r.item];
    for (Total* t : {&totals[it.kind], &all}) {
      t->count++;
      t->bytes += it.bytes;
      t->linked += it.linked ? it.bytes : 0;
    }
  }
  if (json_out) {
    nlohmann::json j = {{"store", ctx.store_root.string()}, {"dry_run", dry},  {"before_bytes", plan.before},
                        {"after_bytes", plan.after},        {"freed_bytes", all.bytes},
                        {"still_linked_bytes", all.linked}, {"seconds", seconds}};
    j["removed"] = nlohmann::json::object();
    for (gc::Kind k : gc::kKinds)
      j["removed"][gc::kind_name(k)] = {{"count", totals[k].count}, {"bytes", totals[k].bytes}};
    if (verbose) {
      j["items"] = nlohmann::json::array();
      for (const auto& r : plan.remove)
        j["items"].push_back({{"path", scan.items[r.item].path},
                              {"bytes", scan.items[r.item].bytes},
                              {"why", gc::why_name(r.why)}});
    }
    print_document(j, true);
    return kExitOk;
  }
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  if (verbose)
    for (const auto& r : plan.remove)
      line((dry ? "would remove " : "removed ") + scan.items[r.item].path + " (" +
           human_bytes(static_cast<double>(scan.items[r.item].bytes)) + ", " + gc::why_name(r.why) + ")");
  line(std::string(dry ? "would remove" : "removed") + (all.count ? ":" : ": nothing"));
  for (gc::Kind k : gc::kKinds) {
    const Total& t = totals[k];
    if (!t.count) continue;
    char buf[160];
    snprintf(buf, sizeof buf, "  %-14s %7zu  %s", gc::kind_name(k), t.count, human_bytes(static_cast<double>(t.bytes)).c_str());
    line(buf + (t.linked ? " (" + human_bytes(static_cast<double>(t.linked)) + " of it stays on disk, hard-linked from OCI layouts)" : std::string()));
  }
  line(std::string(dry ? "would free " : "freed ") + human_bytes(static_cast<double>(all.bytes)) + "; the store " +
       (dry ? "would be " : "is now ") + human_bytes(static_cast<double>(plan.after)) + " (was " +
       human_bytes(static_cast<double>(plan.before)) + ")");
  if (o.max_size && plan.after > *o.max_size)
    line("the store stays over --max-size " + human_bytes(static_cast<double>(*o.max_size)) +
         ": what is left is not evictable (files gc does not own)");
  fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace sb::cli

#include <archive.h>
#include <archive_entry.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <system_error>
#include <thread>

#include "archive/extract.hpp"
#include "archive/utf8_locale.hpp"
#include "helpers.hpp"
#include "layer/write.hpp"

using namespace sb;

namespace {

// Compressible but not trivial data, the same on every run.
std::string sample_data(size_t n, unsigned seed = 7) {
  std::mt19937 rng(seed);
  const std::string words[] = {"cuda", "cudnn", "nccl", "torch", "\x7f" "ELF", "kernel", "sm_90",
                               std::string(4, '\0')};
  std::string out;
  while (out.size() < n) {
    out += words[rng() % std::size(words)];
    if (rng() % 7 == 0) out += static_cast<char>(rng());
  }
  out.resize(n);
  return out;
}

std::string gunzip(const std::string& gz) {
  z_stream s{};
  inflateInit2(&s, 16 + MAX_WBITS);
  std::string out(gz.size() * 8 + 1024, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  s.avail_in = static_cast<uInt>(gz.size());
  int rc;
  do {
    if (s.total_out == out.size()) out.resize(out.size() * 2);
    s.next_out = reinterpret_cast<Bytef*>(out.data() + s.total_out);
    s.avail_out = static_cast<uInt>(out.size() - s.total_out);
    rc = inflate(&s, Z_NO_FLUSH);
  } while (rc == Z_OK);
  REQUIRE(rc == Z_STREAM_END);
  CHECK(s.avail_in == 0);  // one gzip member, nothing after it
  out.resize(s.total_out);
  inflateEnd(&s);
  return out;
}

// Lists a tar blob as "path type mode uid/gid mtime size link" lines.
std::string listing(const fs::path& blob) {
  Utf8Locale locale;
  struct archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  REQUIRE(archive_read_open_filename(a, blob.c_str(), 65536) == ARCHIVE_OK);
  std::string out;
  struct archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    char line[512];
    const char* link = archive_entry_hardlink(e) ? archive_entry_hardlink_utf8(e) : archive_entry_symlink_utf8(e);
    snprintf(line, sizeof line, "%s %o %lld/%lld %lld %lld %s%s\n", archive_entry_pathname_utf8(e),
             archive_entry_mode(e), (long long)archive_entry_uid(e), (long long)archive_entry_gid(e),
             (long long)archive_entry_mtime(e), (long long)archive_entry_size(e),
             archive_entry_hardlink(e) ? "=> " : link ? "-> " : "", link ? link : "");
    out += line;
    CHECK_FALSE(archive_entry_atime_is_set(e));
    CHECK_FALSE(archive_entry_ctime_is_set(e));
  }
  archive_read_free(a);
  return out;
}

// A small tree with every kind of entry the canonical form cares about.
void make_tree(const fs::path& root) {
  test::write(root / "bin/tool", "#!/bin/sh\necho tool\n", 0755);
  test::write(root / "etc/conf", "key=value\n", 0600);
  test::write(root / "data/big", sample_data(300000), 0644);
  test::write(root / "data/empty", "", 0644);
  fs::create_symlink("../bin/tool", root / "data/link");
  fs::create_hard_link(root / "bin/tool", root / "data/z-alias");
  fs::create_hard_link(root / "bin/tool", root / "a-first");
  test::write(root / "dir with space/ünïcode", "u", 0644);
  const std::string long_name(120, 'p');  // over ustar's 100-byte name field
  test::write(root / long_name / "long", "long", 0644);
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

using test::first_difference;

const char* name_of(Compression c) { return c == Compression::Gzip ? "gzip" : "zstd"; }

}  // namespace

TEST_CASE("compressed bytes do not depend on the thread count", "[layer]") {
  std::string data = sample_data(3 << 20);
  for (Compression c : {Compression::Gzip, Compression::Zstd}) {
    LayerOptions o;
    o.compression = c;
    o.chunk_size = 256 << 10;  // many chunks, so the threads really interleave
    o.threads = 1;
    std::string one = compress_bytes(data, o);
    for (int t : {2, 3, 8}) {
      o.threads = t;
      for (int round = 0; round < 3; ++round) {  // a race would not show every time
        INFO(name_of(c) << ", " << t << " threads, round " << round);
        std::string many = compress_bytes(data, o);
        CHECK(first_difference(many, one) == "identical");
      }
    }
    if (c == Compression::Gzip) {
      CHECK(gunzip(one) == data);
      // RFC 1952 header: deflate, no flags, mtime 0, no extra flags, OS unknown.
      CHECK(one.substr(0, 10) == std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10));
    } else {
      std::string back(data.size(), '\0');
      CHECK(ZSTD_decompress(back.data(), back.size(), one.data(), one.size()) == data.size());
      CHECK(back == data);
    }
  }
}

// A container's pids limit refuses threads (EAGAIN). The same bytes must come
// out from fewer workers, and nothing may abort. A child process becomes an
// ordinary user, for whom RLIMIT_NPROC holds, and may then have `tasks` tasks:
// 1 is itself alone, 2 allows one thread.
std::string with_task_limit(rlim_t tasks, const std::function<std::string()>& produce) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    struct rlimit limit = {tasks, tasks};
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0 ||
        setrlimit(RLIMIT_NPROC, &limit) != 0)
      _exit(3);
    std::string got;
    try {
      // The limit must hold, or nothing would be tested: `tasks` threads
      // beyond this one are always one too many.
      std::mutex hold;
      std::vector<std::thread> probe;
      {
        std::lock_guard lk(hold);
        try {
          for (rlim_t i = 0; i < tasks; ++i) probe.emplace_back([&] { std::lock_guard wait(hold); });
          _exit(4);
        } catch (const std::system_error&) {
        }
      }
      for (auto& t : probe) t.join();
      // A joined thread's task may be released a moment later; wait until
      // the allowed threads can start again.
      for (rlim_t i = 1; i < tasks; ++i)
        for (int tries = 0;; ++tries) {
          try {
            std::thread([] {}).join();
            break;
          } catch (const std::system_error&) {
            if (tries == 1000) _exit(6);
            usleep(1000);
          }
        }
      got = produce();
    } catch (const std::exception& e) {
      got = std::string("error: ") + e.what();
    }
    size_t off = 0;
    while (off < got.size()) {
      ssize_t n = write(fds[1], got.data() + off, got.size() - off);
      if (n <= 0) _exit(5);
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  INFO("child exit status " << (WIFEXITED(st) ? WEXITSTATUS(st) : -1));
  REQUIRE((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  return got;
}

std::string compress_with_task_limit(const std::string& data, LayerOptions o, rlim_t tasks) {
  return with_task_limit(tasks, [&] { return compress_bytes(data, o); });
}

// A layer written through the whole pipeline (the stages' threads, the
// compressor's workers) into a fresh store: "diff_id digest size".
std::string layer_digests(const std::string& data, const LayerOptions& o) {
  TempDir dir;
  Store store(dir.path() / "store");
  LayerBlobWriter w(store, o);
  // Odd-sized writes, so that blocks and chunks end mid-write.
  for (size_t off = 0; off < data.size(); off += 77777) w.write(data.data() + off, std::min<size_t>(77777, data.size() - off));
  Layer l = w.finish();
  return l.diff_id.str() + " " + l.digest.str() + " " + std::to_string(l.size);
}

TEST_CASE("compression gives the same bytes when the system refuses threads", "[layer]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: needs root to become another user");
    return;
  }
  std::string data = sample_data(1 << 20);
  for (Compression c : {Compression::Gzip, Compression::Zstd}) {
    LayerOptions o;
    o.compression = c;
    o.chunk_size = 128 << 10;
    o.threads = 1;
    std::string expected = compress_bytes(data, o);
    o.threads = 8;
    for (rlim_t tasks : {rlim_t(1), rlim_t(2)}) {
      INFO(name_of(c) << ", " << tasks - 1 << " more threads allowed");
      std::string got = compress_with_task_limit(data, o, tasks);
      if (c == Compression::Zstd && tasks == 1) {
        // libzstd's format with workers needs one; without, say so.
        CHECK_THAT(got, Catch::Matchers::StartsWith("error: zstd could not start a worker thread"));
        continue;
      }
      CHECK(first_difference(got, expected) == "identical");
    }
  }
}

TEST_CASE("a layer blob's digests do not depend on the thread count or on threads being refused", "[layer]") {
  std::string data = sample_data(5 << 20);
  for (Compression c : {Compression::Gzip, Compression::Zstd, Compression::None}) {
    LayerOptions o;
    o.compression = c;
    o.chunk_size = 256 << 10;
    o.threads = 1;
    const std::string one = layer_digests(data, o);
    // The diff_id is the tar stream's; the blob is what compress_bytes gives.
    CHECK(one.substr(0, 71) == Digest::of_bytes(data).str());
    CHECK(one.substr(72, 71) == Digest::of_bytes(compress_bytes(data, o)).str());
    for (int t : {2, 16}) {
      o.threads = t;
      INFO(to_string(c) << ", " << t << " threads");
      CHECK(layer_digests(data, o) == one);
    }
    if (geteuid() == 0 && c != Compression::Zstd) {  // zstd needs one worker (the test above)
      o.threads = 8;
      INFO(to_string(c) << ", no thread allowed: every stage runs on the caller's");
      CHECK(with_task_limit(1, [&] { return layer_digests(data, o); }) == one);
    }
  }
}

TEST_CASE("a layer's stages say where the time went", "[layer]") {
  std::string data = sample_data(8 << 20);
  TempDir dir;
  Store store(dir.path() / "store");
  LayerOptions o;
  o.threads = 2;
  LayerBlobWriter w(store, o);
  w.write(data.data(), data.size());
  w.finish();
  const LayerStages& s = w.stages();
  CHECK(s.wall > 0);
  CHECK(s.compress > 0);
  CHECK(s.diff_hash > 0);
  CHECK(s.blob > 0);
  CHECK(s.compress_threads == 2);
  CHECK_THAT(s.summary(), Catch::Matchers::StartsWith("tar ") && Catch::Matchers::Contains(", compress 2x"));
  LayerStages made_up{10, 1, 2, 16, 2, 3};
  CHECK(made_up.bound_by() == "compress");  // 80% per compressor
  made_up.blob = 9;
  CHECK(made_up.bound_by() == "blob");
}

TEST_CASE("gzip output of empty and chunk-sized inputs is valid", "[layer]") {
  LayerOptions o;
  o.chunk_size = 64 << 10;
  for (size_t n : {size_t(0), size_t(1), size_t(64 << 10), size_t(128 << 10), size_t((64 << 10) + 1)}) {
    std::string data = sample_data(n, static_cast<unsigned>(n));
    CHECK(gunzip(compress_bytes(data, o)) == data);
  }
}

// Progress of a layer is what has been compressed, not only what was read:
// libzstd's workers take a whole job (32 MiB at level 19) before they start,
// so a small layer used to sit at 100% while it was compressed.
TEST_CASE("layer progress follows the compressor - it moves while zstd finishes", "[layer]") {
  TempDir dir;
  const std::string data = sample_data(6 << 20);
  test::write(dir.path() / "tree/blob", data, 0644);
  ScanOptions so;
  so.source_date_epoch = 1000;
  EntryMap entries;
  scan_tree(dir.path() / "tree", "", so, entries);
  Store store(dir.path() / "store");

  SECTION("the blob writer holds input until the workers have it") {
    LayerOptions o;
    o.compression = Compression::Zstd;
    o.level = 19;
    o.threads = 2;
    LayerBlobWriter w(store, o);
    w.write(data.data(), data.size());
    CHECK(w.bytes_in() == data.size());
    CHECK(w.bytes_compressed() < w.bytes_in());
    int ticks = 0;
    w.finish([&] { ++ticks; });
    CHECK(ticks >= 2);  // output comes in pieces while the job runs
    CHECK(w.bytes_compressed() == w.bytes_in());
  }

  for (Compression c : {Compression::Zstd, Compression::Gzip}) {
    INFO(name_of(c));
    LayerOptions o;
    o.compression = c;
    o.level = c == Compression::Zstd ? 19 : -1;
    o.chunk_size = 256 << 10;  // gzip: 24 chunks, a few of them in flight
    std::vector<uint64_t> seen;
    Layer l = write_layer(entries, store, o, [&](uint64_t done) { seen.push_back(done); });
    REQUIRE(!seen.empty());
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen.back() == data.size());
    CHECK(l.diff_id == write_layer(entries, store, o).diff_id);
    std::set<uint64_t> between(seen.begin(), seen.end());
    between.erase(0);
    between.erase(data.size());
    if (c == Compression::Zstd) {
      // Read at once, then compressed: it shows 0, then steps up while finishing.
      CHECK(std::count(seen.begin(), seen.end(), uint64_t(0)) >= 2);
      CHECK(between.size() >= 2);
    } else {
      CHECK(between.size() >= 2);  // it follows the reading, a few chunks behind
    }
  }
}

TEST_CASE("a layer's tar is canonical and its digests are golden", "[layer]") {
  TempDir dir;
  fs::path tree = dir.path() / "tree";
  make_tree(tree);
  ScanOptions so;
  so.source_date_epoch = 1000;  // older than every file here: all mtimes become 1000
  EntryMap entries;
  scan_tree(tree, "", so, entries);
  link_hardlinks(entries);
  Store store(dir.path() / "store");
  Layer l = write_layer(entries, store, LayerOptions{});

  std::string list = listing(store.blob_path(l.digest));
  std::string expected;
  test::check_golden("layer_listing.txt", list, expected);
  CHECK(list == expected);
  std::string digests = l.diff_id.str() + "\n" + l.digest.str() + "\n";
  test::check_golden("layer_digests.txt", digests, expected);
  CHECK(digests == expected);
  CHECK(l.size == store.size(l.digest));
  CHECK(Digest::of_file(store.blob_path(l.digest)) == l.digest);
  CHECK(Digest::of_bytes(gunzip(read_file(store.blob_path(l.digest)))) == l.diff_id);

  // The hardlinks point at the first of their paths in byte order.
  CHECK_THAT(list, Catch::Contains("bin/tool 755 0/0 1000 0 => a-first"));
  CHECK_THAT(list, Catch::Contains("data/z-alias 755 0/0 1000 0 => a-first"));

  SECTION("one changed byte changes both digests") {
    std::string big = read_file(tree / "data/big");
    big[1000] ^= 1;
    test::write(tree / "data/big", big, 0644);
    EntryMap again;
    scan_tree(tree, "", so, again);
    link_hardlinks(again);
    Layer l2 = write_layer(again, store, LayerOptions{});
    CHECK(l2.diff_id != l.diff_id);
    CHECK(l2.digest != l.digest);
  }
}

TEST_CASE("names that are not UTF-8 are archived as their bytes - the same every time", "[layer]") {
  // A base image's file that a step deletes, a source tree's Latin-1 name.
  TempDir dir;
  fs::path tree = dir.path() / "tree";
  test::write(tree / "lat\xe9n/t\xffx", "data", 0755);
  fs::create_symlink("t\xffx", tree / "lat\xe9n/sym");
  fs::create_hard_link(tree / "lat\xe9n/t\xffx", tree / "lat\xe9n/hard");
  test::write(tree / "caf\xc3\xa9", "utf-8", 0644);
  ScanOptions so;
  so.source_date_epoch = 1000;
  fs::create_directories(dir.path() / "up");  // a step that only deleted
  auto layer_in = [&](const fs::path& store_dir) {
    EntryMap entries;
    scan_tree(tree, "", so, entries);
    for (auto& [p, e] : entries_from_changeset(Changeset{dir.path() / "up", {"lat\xe9n/gone\xfe"}, {}}, so))
      entries.emplace(p, e);
    link_hardlinks(entries);
    Store store(store_dir);
    Layer l = write_layer(entries, store, LayerOptions{});
    return std::pair{l, store.blob_path(l.digest)};
  };
  auto [one, blob] = layer_in(dir.path() / "s1");
  CHECK(layer_in(dir.path() / "s2").first.digest == one.digest);

  // The five entries under lat\xe9n/ say their names are bytes; café's is UTF-8 as before.
  std::string tar = gunzip(read_file(blob));
  size_t binary = 0;
  for (size_t at = 0; (at = tar.find("hdrcharset=BINARY", at)) != std::string::npos; ++at) ++binary;
  CHECK(binary == 5);
  CHECK_THAT(tar, Catch::Contains("path=caf\xc3\xa9\n"));

  // Unpacked over a lower layer: the bytes as they were, the whiteout applied.
  TempDir out;
  test::write(out.path() / "lat\xe9n/gone\xfe", "lower", 0644);
  ExtractStats stats;
  extract_layer(blob, out.path(), ExtractOptions{}, stats);
  fs::path d = out.path() / "lat\xe9n";
  CHECK(read_file(d / "t\xffx") == "data");
  CHECK(fs::read_symlink(d / "sym") == "t\xffx");
  CHECK(fs::equivalent(d / "hard", d / "t\xffx"));
  CHECK_FALSE(fs::exists(fs::symlink_status(d / "gone\xfe")));
  CHECK(read_file(out.path() / "caf\xc3\xa9") == "utf-8");
}

TEST_CASE("xattrs are archived sorted - host-only ones are dropped", "[layer]") {
  TempDir dir;
  fs::path f = dir.path() / "tree/file";
  test::write(f, "x");
  if (::setxattr(f.c_str(), "user.b", "2", 1, 0) != 0) {
    WARN("user xattrs are not supported here; skipping");
    return;
  }
  ::setxattr(f.c_str(), "user.a", "1", 1, 0);
  EntryMap entries;
  scan_tree(dir.path() / "tree", "", ScanOptions{}, entries);
  const auto& x = entries.at("file").xattrs;
  REQUIRE(x.size() == 2);
  CHECK(x[0].first == "user.a");
  CHECK(x[1].first == "user.b");
}

TEST_CASE("a changeset becomes entries with explicit whiteouts", "[layer]") {
  TempDir dir;
  test::write(dir.path() / "up/etc/new", "n");
  Changeset c{dir.path() / "up", {"etc/old", "var/cache"}, {"opt/app"}};
  EntryMap e = entries_from_changeset(c, ScanOptions{});
  std::vector<std::string> paths;
  for (const auto& [p, _] : e) paths.push_back(p);
  CHECK(paths == std::vector<std::string>{"etc", "etc/.wh.old", "etc/new", "opt", "opt/app",
                                          "opt/app/.wh..wh..opq", "var", "var/.wh.cache"});
  CHECK_THROWS_WITH(entries_from_changeset(Changeset{{}, {"../x"}, {}}, ScanOptions{}), Catch::Contains("'..'"));
}

TEST_CASE("overlayfs upper directories: 0/0 devices are whiteouts", "[layer]") {
  // Making a 0/0 character device needs root; the conversion is checked where possible.
  TempDir dir;
  fs::create_directories(dir.path() / "up");
  if (::mknod((dir.path() / "up/gone").c_str(), S_IFCHR | 0600, 0) != 0) {
    WARN("cannot mknod here (not root); skipping");
    return;
  }
  ScanOptions so;
  so.overlay_whiteouts = true;
  EntryMap e;
  scan_tree(dir.path() / "up", "", so, e);
  CHECK(e.count(".wh.gone") == 1);
  CHECK(e.count("gone") == 0);
}

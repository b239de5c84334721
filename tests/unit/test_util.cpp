#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "fetch/source/source.hpp"
#include "helpers.hpp"
#include "store/store.hpp"
#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/glob.hpp"
#include "util/http.hpp"
#include "util/limits.hpp"
#include "util/number.hpp"
#include "util/process.hpp"
#include "util/utf8.hpp"
#include "util/yaml_reader.hpp"

using namespace sb;

TEST_CASE("Digest parses only well-formed sha256 digests", "[util]") {
  std::string hex(64, 'a');
  CHECK(Digest::parse("sha256:" + hex).hex() == hex);
  CHECK_THROWS_WITH(Digest::parse("sha512:" + hex), Catch::Contains("only sha256"));
  CHECK_THROWS_WITH(Digest::parse("sha256:" + hex.substr(1)), Catch::Contains("64 hex"));
  CHECK_THROWS_WITH(Digest::parse("sha256:" + std::string(64, 'A')), Catch::Contains("lowercase hex"));
}

TEST_CASE("Sha256 matches the FIPS 180-2 test vectors - in one piece or streamed", "[util]") {
  CHECK(Digest::of_bytes("abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Digest::of_bytes("").hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 h;
  h.update("a");
  h.update("bc");
  CHECK(h.finish() == Digest::of_bytes("abc"));
}

TEST_CASE("Digest::of_files gives each file's digest in order on any number of threads", "[util]") {
  TempDir dir;
  std::vector<fs::path> files;
  for (int i = 0; i < 40; ++i) {
    files.push_back(dir.path() / ("f" + std::to_string(i)));
    test::write(files.back(), std::string(static_cast<size_t>(i) * 1000, static_cast<char>('a' + i % 26)));
  }
  std::vector<Digest> one;
  for (const auto& f : files) one.push_back(Digest::of_file(f));
  for (size_t threads : {1, 2, 7, 64}) {
    CAPTURE(threads);
    CHECK(Digest::of_files(files, threads) == one);
  }
  CHECK(Digest::of_files({}, 4).empty());
  SECTION("the first failing file in the given order is the error") {
    files.insert(files.begin() + 30, dir.path() / "later-missing");
    files.insert(files.begin() + 5, dir.path() / "missing");
    CHECK_THROWS_WITH(Digest::of_files(files, 4), Catch::Contains("missing") && !Catch::Contains("later-missing"));
  }
}

TEST_CASE("a source tree holding a fifo or a socket is refused by name - never read", "[util][trust]") {
  // A local `source: {path: DIR}` is the recipe's input: a fifo there would
  // block the digest's open() forever (no writer), a device would read forever.
  TempDir dir;
  test::write(dir.path() / "ok.c", "int main() {}");
  const fs::path fifo = dir.path() / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(Digest::of_file(fifo), Catch::Contains(fifo.string()) && Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(Digest::of_files({dir.path() / "ok.c", fifo}, 2), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(source::tree_digest(dir.path()), Catch::Contains("pipe") && Catch::Contains("not a regular file"));
  fs::remove(fifo);
  CHECK_NOTHROW(source::tree_digest(dir.path()));
}

TEST_CASE("a tree's files are hashed without following links - a link swapped in is refused", "[util][trust]") {
  // tree_digest lstat()s the whole tree, then hashes its regular files on
  // every core: a file replaced meanwhile by a link to a host file (a
  // secret, a device) must not be read through the link.
  TempDir dir, outside;
  test::write(outside.path() / "secret", "host secret");
  test::write(dir.path() / "a.c", "int a;");
  fs::create_symlink(outside.path() / "secret", dir.path() / "swapped");
  CHECK_THROWS_WITH(Digest::of_files({dir.path() / "a.c", dir.path() / "swapped"}, 2, /*follow_links=*/false),
                    Catch::Contains("swapped") && Catch::Contains("symbolic link"));
  CHECK(Digest::of_file(dir.path() / "swapped") == Digest::of_bytes("host secret"));  // callers that follow: as before
  // The tree's own link is keyed by its text, not the file it names.
  Digest before = source::tree_digest(dir.path());
  test::write(outside.path() / "secret", "changed");
  CHECK(source::tree_digest(dir.path()) == before);
}

TEST_CASE("globs of paths: star within a component - double star across - classes", "[util][glob]") {
  const char* lib = "/usr/local/lib/python3.11/dist-packages/nvidia/cufft/lib/libcufftw.so.11";
  CHECK(glob_match(lib, lib));
  CHECK(glob_match("/usr/local/lib/python3.*/dist-packages/nvidia/cufft/lib/libcufftw.so.*", lib));
  CHECK(glob_match("**/libcufftw.so.*", lib));
  CHECK(glob_match("/usr/**/nvidia/**/libcufft*", lib));
  CHECK(glob_match("/usr/local/**/lib/libcufftw.so.1[0-9]", lib));
  CHECK(glob_match("/**/libcufftw.so.1?", lib));
  CHECK_FALSE(glob_match("/usr/local/lib/*/libcufftw.so.11", lib));  // '*' stays within one component
  CHECK_FALSE(glob_match("**/libcufft.so.*", lib));
  CHECK_FALSE(glob_match("/usr/local/**/lib/libcufftw.so.1[!1]", lib));
  CHECK_FALSE(glob_match("/usr/local/lib/python3.11", lib));          // the whole path, not a prefix
  CHECK(glob_match("/a/**/b", "/a/b"));                                 // '**' may be no component
  CHECK(glob_match("/a/\\*", "/a/*"));
  CHECK_FALSE(glob_match("/a/\\*", "/a/b"));
  CHECK(glob_match("/a/[]x]", "/a/]"));
  CHECK(glob_match("/a/*.so*", "/a/libx.so"));
  CHECK_FALSE(glob_match("/a/*x", "/a/b/x"));

  CHECK(glob_error("/usr/lib/*.so").empty());
  CHECK_THAT(glob_error(""), Catch::Contains("empty pattern"));
  CHECK_THAT(glob_error("/usr/lib/[abc"), Catch::Contains("unclosed '['"));
  CHECK_THAT(glob_error("/usr/lib/[z-a]"), Catch::Contains("reversed range 'z-a'"));
  CHECK_THAT(glob_error("/usr/lib/x\\"), Catch::Contains("nothing after it"));
  CHECK_THAT(glob_error("/usr/lib/**.so"), Catch::Contains("'**' that is not a whole path component"));
  CHECK_THAT(glob_error("/usr//lib"), Catch::Contains("empty path component"));
  CHECK_THAT(glob_error("/usr/lib/"), Catch::Contains("empty path component"));
  CHECK_FALSE(glob_match("/usr/lib/[abc", "/usr/lib/[abc"));  // a bad glob matches nothing
}

TEST_CASE("KeyHasher keeps field boundaries", "[util]") {
  CHECK(KeyHasher().field("x", "ab").field("y", "c").finish() !=
        KeyHasher().field("x", "a").field("y", "bc").finish());
  CHECK(KeyHasher().field("x", "a").finish() != KeyHasher().field("y", "a").finish());
  CHECK(KeyHasher().field("x", "a").finish() == KeyHasher().field("x", "a").finish());
}

TEST_CASE("AtomicFile leaves nothing without commit - the whole file with it", "[util]") {
  TempDir dir;
  fs::path dest = dir.path() / "out";
  {
    AtomicFile f(dest);
    f.write("partial");
  }
  CHECK(fs::is_empty(dir.path()));
  {
    AtomicFile f(dest, 0600);
    f.write("whole");
    f.commit();
  }
  CHECK(read_file(dest) == "whole");
  CHECK((fs::status(dest).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("InputError renders file:line:col - the quoted line and a caret", "[util]") {
  TempDir dir;
  fs::path f = dir.path() / "r.yaml";
  test::write(f, "stack: x\nlayrs: []\n");
  InputError e(SourceLocation{f.string(), 2, 1}, "unknown key 'layrs'", "known keys: layers");
  std::string r = e.render();
  CHECK_THAT(r, Catch::StartsWith(f.string() + ":2:1: unknown key 'layrs'"));
  CHECK_THAT(r, Catch::Contains("\n    layrs: []\n    ^"));
  CHECK_THAT(r, Catch::Contains("known keys: layers"));
  CHECK(e.kind() == ErrorKind::Input);
  CHECK(suggest("layrs", {"stack", "layers", "tags"}) == "layers");
  CHECK(suggest("zzzzzz", {"stack", "layers"}).empty());
}

TEST_CASE("run_process passes argv and exactly the given environment", "[util]") {
  auto r = run_process({{"sh", "-c", "echo \"$1:$FOO:${HOME-unset}\"", "sh", "a b"},
                        {{"FOO", "bar"}, {"PATH", "/usr/bin:/bin"}}, {}, true, false});
  CHECK(r.exit_status == 0);
  CHECK(r.output == "a b:bar:unset\n");
  CHECK(run_process({{"sh", "-c", "exit 7"}, {{"PATH", "/usr/bin:/bin"}}, {}, false, false}).exit_status == 7);
  CHECK_THROWS_WITH(run_process({{"no-such-program-here"}, {{"PATH", "/usr/bin"}}, {}, false, false}),
                    Catch::Contains("not found"));
}

TEST_CASE("Store checks digests on the way in and keeps no partial blob", "[store]") {
  TempDir dir;
  Store store(dir.path());
  Digest d = store.put("hello");
  CHECK(store.has(d));
  CHECK(store.read(d) == "hello");
  CHECK(store.blob_path(d) == dir.path() / "blobs" / "sha256" / d.hex());
  CHECK_THROWS_WITH(store.put("other", d), Catch::Contains("digest mismatch"));
  CHECK(fs::is_empty(dir.path() / "tmp"));
  {
    auto w = store.writer();
    w.write("never committed");
  }
  CHECK(fs::is_empty(dir.path() / "tmp"));
  // A corrupted blob is caught when read back.
  fs::permissions(store.blob_path(d), fs::perms::owner_all);
  test::write(store.blob_path(d), "hellO");
  CHECK_THROWS_WITH(store.read(d), Catch::Contains("corrupt"));
}

// A blob of several direct-I/O chunks and a tail, handed over in pieces that
// straddle the chunks' edges: the same bytes and digest on the disk, directly
// written where the filesystem takes it (ext4 for /tmp here), through the page
// cache on tmpfs.
TEST_CASE("Store writes large blobs byte for byte, directly where the filesystem allows", "[store]") {
  std::string bytes(3 * DirectWriter::kChunk + 12345, '\0');
  uint64_t x = 88172645463325252ull;
  for (auto& c : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  std::vector<fs::path> parents{fs::temp_directory_path()};
  if (fs::is_directory("/dev/shm")) parents.push_back("/dev/shm");
  for (const auto& parent : parents) {
    INFO(parent);
    TempDir dir(parent);
    Store store(dir.path());
    auto w = store.writer();
    for (size_t at = 0, piece = 1000003; at < bytes.size(); at += piece)
      w.write(bytes.data() + at, std::min(piece, bytes.size() - at));
    UniqueFd probe(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    CHECK(w.wrote_direct() == DirectWriter::supported(probe.get()));
    Digest d = w.commit(Digest::of_bytes(bytes));
    CHECK(store.read(d) == bytes);
    CHECK(fs::is_empty(dir.path() / "tmp"));
    // A small blob never fills a chunk: written whole at commit.
    CHECK(store.read(store.put("small")) == "small");
  }
}

TEST_CASE("Store locks exclude another process", "[store]") {
  TempDir dir;
  Store store(dir.path());
  fs::path marker = dir.path() / "marker";
  auto lock = store.lock("x");
  pid_t pid = fork();
  if (pid == 0) {
    // The child blocks on the lock, then records whether the marker existed.
    Store s(dir.path());
    auto l = s.lock("x");
    _exit(fs::exists(marker) ? 0 : 1);
  }
  usleep(200 * 1000);
  test::write(marker, "parent was first");
  lock.reset();
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

#include <nlohmann/json.hpp>

#include "util/status.hpp"

// The lines a status of `mode` prints for what `use` does with it.
static std::vector<std::string> status_output(StatusMode mode, bool verbose,
                                              const std::function<void(Status&)>& use) {
  FILE* f = tmpfile();
  {
    auto s = make_status(mode, f, verbose);
    use(*s);
  }
  rewind(f);
  std::vector<std::string> lines;
  char buf[1024];
  while (fgets(buf, sizeof buf, f)) lines.emplace_back(buf, strcspn(buf, "\n"));
  fclose(f);
  return lines;
}

static std::vector<std::string> status_lines(StatusMode mode, bool verbose = false) {
  return status_output(mode, verbose, [](Status& s) {
    int id = s.task_begin("layer app", 100);
    s.task_progress(id, 50);
    s.message(Level::Debug, "debug detail");
    s.message(Level::Warning, "careful");
    s.task_end(id, "sha256:x");
    s.result("hello:1.0", "sha256:y");
  });
}

TEST_CASE("Status renders plain lines and JSON lines", "[util]") {
  auto plain = status_lines(StatusMode::Plain);
  REQUIRE(plain.size() == 3);  // no debug line without --verbose
  CHECK(plain[0] == "warning: careful");
  CHECK_THAT(plain[1], Catch::StartsWith("[done] layer app: sha256:x ("));
  CHECK(plain[2] == "hello:1.0: sha256:y");
  CHECK(status_lines(StatusMode::Plain, true).size() == 5);  // [start] and the debug line

  auto json = status_lines(StatusMode::Json);
  std::vector<std::string> events;
  for (const auto& l : json) events.push_back(nlohmann::json::parse(l).at("event"));
  CHECK(events == std::vector<std::string>{"task_begin", "task_progress", "message", "task_end", "result"});
  auto end = nlohmann::json::parse(json[3]);
  CHECK(end["label"] == "layer app");
  CHECK(end["result"] == "sha256:x");
}

TEST_CASE("Status JSON lines stay JSON when a text is not UTF-8", "[util]") {
  // A message naming a base image's file, whose name is bytes.
  auto lines = status_output(StatusMode::Json, false, [](Status& s) {
    s.message(Level::Warning, "usr/lib/t\xffx: odd");
    s.result("img:1", "ok\xc3");
  });
  REQUIRE(lines.size() == 2);
  CHECK(nlohmann::json::parse(lines[0]).at("text") == "usr/lib/t\xef\xbf\xbdx: odd");  // U+FFFD
  CHECK(nlohmann::json::parse(lines[1]).at("value") == "ok\xef\xbf\xbd");
}

// Plain mode (CI logs): a running task prints a progress line (bytes, of the
// total, rate) at most every STACKBUILD_PROGRESS_INTERVAL seconds, and its
// [done] line says how much it moved and how fast.
TEST_CASE("Status plain lines give progress and rates", "[util]") {
  auto run = [](const char* interval) {
    setenv("STACKBUILD_PROGRESS_INTERVAL", interval, 1);  // read when the status is made
    auto lines = status_output(StatusMode::Plain, false, [](Status& s) {
      int id = s.task_begin("layer big", 4 << 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      s.task_progress(id, 1 << 20);
      s.task_progress(id, 2 << 20);
      s.task_end(id, "sha256:z");
      int quiet = s.task_begin("layer steps", 0);  // nothing counted: no amount
      s.task_end(quiet, "ok");
    });
    unsetenv("STACKBUILD_PROGRESS_INTERVAL");
    return lines;
  };
  auto every = run("0");
  REQUIRE(every.size() == 4);
  CHECK_THAT(every[0], Catch::StartsWith("[....] layer big: 1.0 MiB of 4.0 MiB (25%), ") && Catch::EndsWith("s)"));
  CHECK_THAT(every[1], Catch::StartsWith("[....] layer big: 2.0 MiB of 4.0 MiB (50%), "));
  CHECK_THAT(every[2], Catch::StartsWith("[done] layer big: sha256:z (") && Catch::Contains(", 2.0 MiB at ") &&
                           Catch::EndsWith("/s)"));
  CHECK_THAT(every[3], Catch::Matches(R"(\[done\] layer steps: ok \([0-9.]+s\))"));
  auto seldom = run("3600");  // no line until an hour has passed
  REQUIRE(seldom.size() == 2);
  CHECK_THAT(seldom[0], Catch::StartsWith("[done] layer big: sha256:z ("));
  for (const char* bad : {"soon", "-1", "5s"}) {
    setenv("STACKBUILD_PROGRESS_INTERVAL", bad, 1);
    CHECK_THROWS_WITH(make_status(StatusMode::Tty, stderr), Catch::Contains("STACKBUILD_PROGRESS_INTERVAL='" +
                                                                             std::string(bad) + "' is not a number"));
  }
  unsetenv("STACKBUILD_PROGRESS_INTERVAL");
}

TEST_CASE("human_bytes", "[util]") {
  CHECK(human_bytes(512) == "512 B");
  CHECK(human_bytes(1536) == "1.5 KiB");
  CHECK(human_bytes(3.5 * 1024 * 1024 * 1024) == "3.5 GiB");
}

#include <fcntl.h>
#include <sys/resource.h>

#include <thread>

// In a child process (the limit is the process's): every descriptor in use,
// then open_waiting() gets one as soon as another thread closes one, and,
// when none is closed, fails after the wait with EMFILE and a message that
// names the file and the limit.
TEST_CASE("open_waiting waits for a free descriptor - then says which file and which limit", "[util]") {
  TempDir dir;
  fs::path file = dir.path() / "blob";
  test::write(file, "x");
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl {64, 64};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    std::vector<int> held;
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
    if (errno != EMFILE || held.empty()) _exit(11);
    set_descriptor_wait_seconds(5);
    int last = held.back();
    std::thread closer([last] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      ::close(last);
    });
    auto start = std::chrono::steady_clock::now();
    int fd = open_waiting(file.c_str(), O_RDONLY | O_CLOEXEC);
    closer.join();
    if (fd < 0) _exit(12);
    if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100)) _exit(13);
    // Now none is closed: the wait runs out.
    set_descriptor_wait_seconds(0.3);
    start = std::chrono::steady_clock::now();
    if (open_waiting(file.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EMFILE) _exit(14);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited < 0.25 || waited > 3) _exit(15);
    try {
      read_file(file);
      _exit(16);
    } catch (const Error& e) {
      std::string m = e.what();
      bool clear = m.find("open " + file.string() + ": Too many open files") != std::string::npos &&
                   m.find("ulimit -n, is 64") != std::string::npos;
      _exit(clear ? 0 : 17);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("parse_integer takes whole numbers that fit and nothing else", "[util]") {
  CHECK(parse_integer<int64_t>("0") == 0);
  CHECK(parse_integer<int64_t>("-12") == -12);
  CHECK(parse_integer<int64_t>("9223372036854775807") == INT64_MAX);
  CHECK_FALSE(parse_integer<int64_t>("9223372036854775808"));
  CHECK(parse_integer<uint64_t>("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_integer<uint64_t>("18446744073709551616"));
  CHECK_FALSE(parse_integer<uint64_t>("-1"));
  CHECK_FALSE(parse_integer<int>(""));
  CHECK_FALSE(parse_integer<int>("+1"));
  CHECK_FALSE(parse_integer<int>(" 1"));
  CHECK_FALSE(parse_integer<int>("1 "));
  CHECK_FALSE(parse_integer<int>("12abc"));
  CHECK(parse_integer<uint32_t>("ff", 16) == 255);
  CHECK_FALSE(parse_integer<uint32_t>("0x10", 16));
  CHECK(compare_digit_strings("007", "7") == 0);
  CHECK(compare_digit_strings("10", "9") == 1);
  CHECK(compare_digit_strings("99999999999999999999999", "100000000000000000000000") == -1);
  CHECK(compare_digit_strings("", "0") == 0);
}

TEST_CASE("utf8_error_at finds the first byte that is not UTF-8", "[util]") {
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("plain ascii"));
  CHECK(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));  // é € 😀 U+10FFFF
  CHECK(utf8_error_at("caf\xe9") == 3);                        // Latin-1
  CHECK(utf8_error_at("ab\xc3") == 2);                         // cut short
  CHECK(utf8_error_at("\xc0\xaf") == 0);                       // overlong '/'
  CHECK(utf8_error_at("\xe0\x80\xaf") == 0);                   // overlong
  CHECK(utf8_error_at("x\xed\xa0\x80") == 1);                  // a surrogate
  CHECK(utf8_error_at("\xf4\x90\x80\x80") == 0);               // past U+10FFFF
  CHECK(utf8_error_at("\xe2\x82x") == 0);                      // a bad continuation
  CHECK(utf8_error_at("\x80") == 0);                           // a lone continuation
}

TEST_CASE("printable_utf8 keeps UTF-8 and shows every other byte in hex", "[util]") {
  CHECK(printable_utf8("") == "");
  CHECK(printable_utf8("usr/lib/caf\xc3\xa9") == "usr/lib/caf\xc3\xa9");
  CHECK(printable_utf8("t\xffx") == "t\\xFFx");
  CHECK(printable_utf8("caf\xe9\xc3\xa9\xe9") == "caf\\xE9\xc3\xa9\\xE9");  // Latin-1 around UTF-8
  CHECK(printable_utf8("ab\xe2\x82") == "ab\\xE2\\x82");                    // cut short: each byte
  CHECK(printable_utf8("\xed\xa0\x80") == "\\xED\\xA0\\x80");                 // a surrogate
  CHECK(valid_utf8(printable_utf8("\x80\xc0\xaf\xf4\x90\x80\x80z")));
  CHECK(nlohmann::json(printable_utf8("lib\xfe.so")).dump() == "\"lib\\\\xFE.so\"");
}

TEST_CASE("Retry-After of more seconds than fit is a long wait and no exception", "[util][http]") {
  http::Response r;
  r.headers["retry-after"] = "120";
  CHECK(http::retry_after(r) == 120.0);
  r.headers["retry-after"] = std::string(400, '9');
  REQUIRE(http::retry_after(r));
  CHECK(*http::retry_after(r) > 1e17);
}

TEST_CASE(
    "yaml::Reader: a key missing from a const map is an input error, not yaml-cpp's InvalidNode",
    "[util][yaml]") {
  yaml::Reader r("f.yaml");
  const YAML::Node map = r.parse("a: {b: 1}\n");
  const YAML::Node inner = map["a"];
  const YAML::Node missing = inner["nope"];  // an invalid node: its Type() and Mark() throw
  CHECK(yaml::describe(missing) == std::string("nothing"));
  CHECK(r.at(missing).str() == "f.yaml");
  try {
    r.string(missing, "'nope'");
    FAIL("read a missing key");
  } catch (const InputError& e) {
    CHECK(e.message() == "expected a string for 'nope', got nothing");
    CHECK(e.location().file == "f.yaml");
  }
  CHECK_THROWS_AS(r.expect_map(missing, "'nope'"), InputError);
  CHECK_THROWS_AS(r.expect_list(missing, "'nope'"), InputError);
  CHECK_THROWS_AS(r.string_or_strings(missing, "'nope'"), InputError);
  CHECK(r.string(inner["b"], "'b'") == "1");
}

TEST_CASE(
    "write_file_atomic into a directory that does not exist names the file, not its temporary",
    "[util][file]") {
  TempDir tmp;
  fs::path dest = tmp.path() / "no-such-dir" / "out.json";
  CHECK_THROWS_WITH(write_file_atomic(dest, "x"),
                    "cannot write " + dest.string() + ": the directory " +
                        dest.parent_path().string() + " does not exist");
  CHECK_FALSE(fs::exists(dest.parent_path()));
}

TEST_CASE("limits: a cap comes from its setting, else the default, and says how to raise it", "[util][limits]") {
  unsetenv("STACKBUILD_TEST_CAP");
  CHECK(size_limit("STACKBUILD_TEST_CAP", 4 << 20).bytes == 4 << 20);
  CHECK(size_limit("STACKBUILD_TEST_CAP", 4 << 20).describe() == "the 4.0 MiB cap (STACKBUILD_TEST_CAP raises it)");
  setenv("STACKBUILD_TEST_CAP", "64MiB", 1);
  CHECK(size_limit("STACKBUILD_TEST_CAP", 1).bytes == uint64_t{64} << 20);
  setenv("STACKBUILD_TEST_CAP", "lots", 1);
  CHECK_THROWS_WITH(size_limit("STACKBUILD_TEST_CAP", 1), Catch::Contains("STACKBUILD_TEST_CAP='lots' is not a size"));
  setenv("STACKBUILD_TEST_CAP", "0", 1);
  CHECK_THROWS_WITH(size_limit("STACKBUILD_TEST_CAP", 1), Catch::Contains("is not a size"));
  unsetenv("STACKBUILD_TEST_CAP");
  CHECK(limits::wheel_inflated().bytes == uint64_t{32} << 30);
  CHECK(limits::registry_document().bytes == 4 << 20);
}

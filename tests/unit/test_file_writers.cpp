#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "archive/file_writers.hpp"
#include "helpers.hpp"
#include "util/direct_write.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

using namespace sb;

namespace {

UniqueFd create(const fs::path& p) {
  UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  REQUIRE(fd.get() >= 0);
  return fd;
}

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 31 + seed + i / 4093) % 26);
  return s;
}

}  // namespace

TEST_CASE("file writers: every file gets its bytes, then its metadata, whatever the thread count", "[file_writers]") {
  for (size_t threads : {size_t(0), size_t(1), size_t(2), size_t(8)}) {
    INFO(threads << " threads");
    TempDir dir;
    FileWriters w(threads, 1 << 20);  // a small bound: the producer waits often
    std::vector<std::string> want;
    for (unsigned i = 0; i < 40; ++i) {
      std::string data = pattern(i * 50001 % 3000000, i);
      want.push_back(data);
      auto f = w.open(create(dir.path() / std::to_string(i)), "file " + std::to_string(i));
      for (size_t off = 0; off < data.size(); off += 65536)
        w.write(f, data.data() + off, std::min<size_t>(65536, data.size() - off), off);
      // Runs after the bytes: the times and the size it sets must stay.
      w.close(f, [size = data.size() + (i % 3 == 0 ? 100 : 0)](int fd) {
        REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
        ::fchmod(fd, 0640);
        struct timespec ts[2] = {{1000, 0}, {1000, 0}};
        ::futimens(fd, ts);
      });
    }
    w.wait();
    for (unsigned i = 0; i < 40; ++i) {
      fs::path p = dir.path() / std::to_string(i);
      std::string got = read_file(p);
      std::string expected = want[i] + (i % 3 == 0 ? std::string(100, '\0') : "");  // a hole at the end
      CHECK(got == expected);
      struct stat st {};
      REQUIRE(::stat(p.c_str(), &st) == 0);
      CHECK(st.st_mtime == 1000);
      CHECK((st.st_mode & 0777) == 0640);
    }
  }
}

// Large files go to the disk directly in whole pages, their unaligned edges
// at the end: bytes handed over in sizes that are not pages, a hole at an
// unaligned offset, a size set past the data. On ext4 (/tmp here) the pages
// went directly; on tmpfs none did; the bytes are the same everywhere.
TEST_CASE("file writers: large files, written directly where the filesystem allows, keep every byte", "[file_writers]") {
  std::vector<fs::path> parents{fs::temp_directory_path()};
  if (fs::is_directory("/dev/shm")) parents.push_back("/dev/shm");
  for (const auto& parent : parents)
    for (size_t threads : {size_t(0), size_t(2), size_t(8)}) {
      INFO(parent << ", " << threads << " threads");
      TempDir dir(parent);
      FileWriters w(threads, 4 << 20);
      const size_t big = FileWriters::kDirectFrom + 3 * 4096 + 123;
      const std::string a = pattern(big, 1), b = pattern(3 << 20, 2);
      auto f = w.open(create(dir.path() / "dense"), "dense", a.size());
      for (size_t off = 0, step = 65537; off < a.size(); off += step, step = step % 70001 + 4099)
        w.write(f, a.data() + off, std::min(step, a.size() - off), off);
      w.close(f, [](int) {});
      // Data, a hole from an unaligned offset, data at another, a size past it.
      const uint64_t second = FileWriters::kDirectFrom + 10007, size = second + b.size() + 99;
      auto g = w.open(create(dir.path() / "sparse"), "sparse", size);
      for (size_t off = 0; off < b.size(); off += 100003)
        w.write(g, b.data() + off, std::min<size_t>(100003, b.size() - off), off);
      for (size_t off = 0; off < b.size(); off += 65536)
        w.write(g, b.data() + off, std::min<size_t>(65536, b.size() - off), second + off);
      w.close(g, [size](int fd) { REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0); });
      w.wait();
      // (In parentheses: a failure must not print megabytes.)
      CHECK((read_file(dir.path() / "dense") == a));
      std::string got = read_file(dir.path() / "sparse");
      REQUIRE(got.size() == size);
      CHECK((got.substr(0, b.size()) == b));
      CHECK(got.find_first_not_of('\0', b.size()) == second);
      CHECK((got.substr(second, b.size()) == b));
      CHECK(got.find_first_not_of('\0', second + b.size()) == std::string::npos);
      UniqueFd probe(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      CHECK((w.direct_bytes() > 0) == DirectWriter::supported(probe.get()));
    }
}

TEST_CASE("file writers: a hole between writes stays a hole", "[file_writers]") {
  TempDir dir;
  FileWriters w(2);
  auto f = w.open(create(dir.path() / "sparse"), "sparse");
  w.write(f, "head", 4, 0);
  w.write(f, "tail", 4, 1 << 21);
  w.close(f, [](int fd) { REQUIRE(::ftruncate(fd, (1 << 21) + 4) == 0); });
  w.wait();
  std::string got = read_file(dir.path() / "sparse");
  REQUIRE(got.size() == (1u << 21) + 4);
  CHECK(got.substr(0, 4) == "head");
  CHECK(got.substr(1 << 21) == "tail");
  CHECK(got.find_first_not_of('\0', 4) == 1u << 21);
}

TEST_CASE("file writers: a write that fails is the extraction's error, named", "[file_writers]") {
  TempDir dir;
  for (size_t threads : {size_t(0), size_t(2)}) {
    INFO(threads << " threads");
    FileWriters w(threads);
    fs::path p = dir.path() / ("ro" + std::to_string(threads));
    write_file_atomic(p, "");
    UniqueFd ro(::open(p.c_str(), O_RDONLY | O_CLOEXEC));  // pwrite on it: EBADF
    auto f = w.open(std::move(ro), "usr/lib/libbig.so");
    std::string block(1 << 20, 'x');
    bool thrown = false;
    try {
      for (int i = 0; i < 64; ++i) w.write(f, block.data(), block.size(), uint64_t(i) << 20);
      w.close(f, {});
      w.wait();
    } catch (const Error& e) {
      thrown = true;
      CHECK_THAT(e.what(), Catch::Matchers::Contains("write usr/lib/libbig.so"));
    }
    CHECK(thrown);
  }
}

TEST_CASE("file writers: many small files under a low descriptor limit", "[file_writers]") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit r = {40, 40};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(3);
    try {
      TempDir dir;
      FileWriters w(4);
      for (int i = 0; i < 2000; ++i) {
        UniqueFd fd(::open((dir.path() / std::to_string(i)).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (fd.get() < 0) _exit(4);  // out of descriptors: the writers held too many
        auto f = w.open(std::move(fd), std::to_string(i));
        w.write(f, "x", 1, 0);
        w.close(f, {});
      }
      w.wait();
    } catch (...) {
      _exit(5);
    }
    _exit(0);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

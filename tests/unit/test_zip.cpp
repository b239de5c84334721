// fetch/pip/zip.hpp: the wheel zip reader (ISA-L inflate) against archives written
// by libarchive and against hand-made ones (zip64, CP437 names, DOS and Unix
// modes, corruption of each kind).
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <random>

#include "helpers.hpp"
#include "fetch/pip/zip.hpp"
#include "util/error.hpp"

using namespace sb;
using namespace sb::pip;

namespace {

struct Scratch {
  TempDir dir;
  fs::path file(const std::string& name, const std::string& bytes) {
    fs::path p = dir.path() / name;
    test::write(p, bytes);
    return p;
  }
};

std::string read_all(const ZipReader& z, const ZipMember& m) {
  std::string out;
  z.read(m, [&](const char* d, size_t n) { out.append(d, n); });
  return out;
}

// libarchive's zip writer: deflate, or store with `options` "zip:compression=store".
std::string libarchive_zip(const std::vector<std::tuple<std::string, std::string, int>>& files,
                           const char* options = nullptr) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  if (options) REQUIRE(archive_write_set_options(a, options) == ARCHIVE_OK);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* o, const void* b, size_t n) -> la_ssize_t {
        static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const auto& [name, data, mode] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, name.ends_with("/") ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e, mode);
    if (!name.ends_with("/")) archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_write_header(a, e);
    if (!data.empty()) archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

void put16(std::string& s, uint16_t v) { s += static_cast<char>(v & 0xFF), s += static_cast<char>(v >> 8); }
void put32(std::string& s, uint32_t v) { put16(s, v & 0xFFFF), put16(s, static_cast<uint16_t>(v >> 16)); }
void put64(std::string& s, uint64_t v) { put32(s, v & 0xFFFFFFFF), put32(s, static_cast<uint32_t>(v >> 32)); }

// A hand-made archive of stored members, with full control of each field.
struct RawMember {
  std::string name, data;
  uint16_t made_by = 3 << 8 | 20;  // Unix
  uint32_t external = (S_IFREG | 0644) << 16;
  uint16_t flags = 0;
  bool zip64 = false;  // sizes and offset in a zip64 extra field
};
std::string raw_zip(const std::vector<RawMember>& ms, bool zip64_end = false) {
  std::string body, cd;
  for (const auto& m : ms) {
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(m.data.data()),
                                               static_cast<uInt>(m.data.size())));
    uint64_t offset = body.size();
    put32(body, 0x04034b50), put16(body, 20), put16(body, m.flags), put16(body, 0), put32(body, 0);
    put32(body, crc), put32(body, static_cast<uint32_t>(m.data.size())), put32(body, static_cast<uint32_t>(m.data.size()));
    put16(body, static_cast<uint16_t>(m.name.size())), put16(body, 0);
    body += m.name + m.data;
    std::string extra;
    if (m.zip64) put16(extra, 1), put16(extra, 24), put64(extra, m.data.size()), put64(extra, m.data.size()),
        put64(extra, offset);
    put32(cd, 0x02014b50), put16(cd, m.made_by), put16(cd, 20), put16(cd, m.flags), put16(cd, 0), put32(cd, 0);
    put32(cd, crc);
    uint32_t sat = 0xFFFFFFFF;
    put32(cd, m.zip64 ? sat : static_cast<uint32_t>(m.data.size()));
    put32(cd, m.zip64 ? sat : static_cast<uint32_t>(m.data.size()));
    put16(cd, static_cast<uint16_t>(m.name.size())), put16(cd, static_cast<uint16_t>(extra.size())), put16(cd, 0);
    put16(cd, 0), put16(cd, 0), put32(cd, m.external), put32(cd, m.zip64 ? sat : static_cast<uint32_t>(offset));
    cd += m.name + extra;
  }
  std::string out = body + cd;
  uint64_t cd_at = body.size();
  if (zip64_end) {
    uint64_t z64_at = out.size();
    put32(out, 0x06064b50), put64(out, 44), put16(out, 45), put16(out, 45), put32(out, 0), put32(out, 0);
    put64(out, ms.size()), put64(out, ms.size()), put64(out, cd.size()), put64(out, cd_at);
    put32(out, 0x07064b50), put32(out, 0), put64(out, z64_at), put32(out, 1);
  }
  put32(out, 0x06054b50), put16(out, 0), put16(out, 0);
  put16(out, zip64_end ? 0xFFFF : static_cast<uint16_t>(ms.size()));
  put16(out, zip64_end ? 0xFFFF : static_cast<uint16_t>(ms.size()));
  put32(out, zip64_end ? 0xFFFFFFFF : static_cast<uint32_t>(cd.size()));
  put32(out, zip64_end ? 0xFFFFFFFF : static_cast<uint32_t>(cd_at));
  put16(out, 7), out += "comment";
  return out;
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 r(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(r());
  return s;
}

}  // namespace

TEST_CASE("zip: libarchive's deflated and stored archives read back exactly, with modes", "[pip][zip]") {
  Scratch s;
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "line " + std::to_string(i % 977) + " of a library\n";  // ~4 MB
  std::string noise = random_bytes(3 << 20, 1);  // incompressible, over several read chunks
  std::vector<std::tuple<std::string, std::string, int>> files = {
      {"pkg/", "", 0755},
      {"pkg/__init__.py", "print('hi')\n", 0644},
      {"pkg/empty.txt", "", 0644},
      {"pkg/bin/tool", "#!python\nrun()\n", 0755},
      {"pkg/text.txt", text, 0644},
      {"pkg/noise.bin", noise, 0644},
  };
  for (const char* options : {static_cast<const char*>(nullptr), "zip:compression=store", "zip:zip64"}) {
    INFO((options ? options : "deflate"));
    ZipReader z(s.file("a.whl", libarchive_zip(files, options)), "wheel a.whl");
    REQUIRE(z.members().size() == files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      const auto& [name, data, mode] = files[i];
      const ZipMember& m = z.members()[i];  // in the order written
      CHECK(m.name == name);
      CHECK(m.directory() == name.ends_with("/"));
      if (m.directory()) continue;
      CHECK(m.regular());
      CHECK(m.executable() == ((mode & 0111) != 0));
      CHECK(m.size == data.size());
      CHECK(read_all(z, m) == data);
    }
  }
}

TEST_CASE("zip: zip64 records and fields, CP437 and UTF-8 names, DOS and Unix modes", "[pip][zip]") {
  Scratch s;
  RawMember plain{"a.txt", "alpha"};
  RawMember z64{"b.txt", "beta"};
  z64.zip64 = true;
  RawMember cp437{std::string("caf\x82.txt"), "gamma"};  // 0x82 is é in CP437
  RawMember utf8{"na\xc3\xafve.txt", "delta"};
  utf8.flags = 0x0800;
  RawMember dos{"dos.bat", "echo"};
  dos.made_by = 20, dos.external = 0x20;  // DOS, archive bit: a file, no exec bit
  RawMember dosdir{"dir/", ""};
  dosdir.made_by = 20, dosdir.external = 0x10;
  RawMember typeless{"run.sh", "x"};
  typeless.external = 0755u << 16;  // permissions without a file type
  RawMember link{"link", "target"};
  link.external = (S_IFLNK | 0777u) << 16;
  ZipReader z(s.file("z.zip", raw_zip({plain, z64, cp437, utf8, dos, dosdir, typeless, link}, true)), "z.zip");
  const auto& m = z.members();
  REQUIRE(m.size() == 8);
  CHECK(read_all(z, m[0]) == "alpha");
  CHECK(m[1].size == 4);
  CHECK(read_all(z, m[1]) == "beta");
  CHECK(m[2].name == "caf\xc3\xa9.txt");
  CHECK(m[3].name == "na\xc3\xafve.txt");
  CHECK((m[4].regular() && !m[4].executable()));
  CHECK(m[5].directory());
  CHECK((m[6].regular() && m[6].executable()));
  CHECK(!m[7].regular());
}

TEST_CASE("zip: damage of each kind is an error naming the archive and the member", "[pip][zip]") {
  Scratch s;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "row " + std::to_string(i) + "\n";
  const std::string good = libarchive_zip({{"pkg/data.txt", text, 0644}});
  auto cd_at = [&](const std::string& zip) { return zip.rfind(std::string("PK\x01\x02", 4)); };
  auto reading = [&](std::string zip) {
    ZipReader z(s.file("bad.whl", zip), "wheel bad.whl");
    REQUIRE(z.members().size() == 1);
    read_all(z, z.members()[0]);
  };
  REQUIRE_NOTHROW(reading(good));

  SECTION("a flipped byte in the deflate stream") {
    std::string bad = good;
    bad[30 + 12 + bad.size() / 4] ^= 0x55;
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("wheel bad.whl: 'pkg/data.txt'"));
  }
  SECTION("a wrong CRC-32") {
    std::string bad = good;
    bad[cd_at(bad) + 16] ^= 1;
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("'pkg/data.txt' fails its CRC-32 check"));
  }
  SECTION("a wrong size") {
    std::string bad = good;
    bad[cd_at(bad) + 24] ^= 1;  // the central directory's alone: the headers disagree
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("'pkg/data.txt': the local header gives a size of"));
    bad[22] ^= 1;  // the local header's too: they agree, and inflating finds it wrong
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("'pkg/data.txt' inflates to"));
  }
  SECTION("another compression method") {
    std::string bad = good;
    bad[cd_at(bad) + 10] = 12;  // bzip2
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("uses compression method 12"));
  }
  SECTION("an encrypted member") {
    std::string bad = good;
    bad[cd_at(bad) + 8] |= 1;
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("'pkg/data.txt' is encrypted"));
  }
  SECTION("a member's data past the end of the file") {
    std::string bad = good;
    bad[cd_at(bad) + 20 + 3] = 0x7F;  // compressed size of about 2 GB
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("lies past the end of the file"));
  }
  SECTION("a local header offset at no header") {
    std::string bad = good;
    bad[cd_at(bad) + 42] = 5;
    CHECK_THROWS_WITH(reading(bad), Catch::Contains("has no local header"));
  }
  SECTION("a cut-off file") {
    CHECK_THROWS_WITH(reading(good.substr(0, good.size() / 2)), Catch::Contains("not a zip file"));
    CHECK_THROWS_WITH(reading(""), Catch::Contains("not a zip file (0 bytes)"));
  }
  SECTION("a central directory that claims more entries than it holds") {
    std::string bad = raw_zip({RawMember{"a.txt", "alpha"}});
    size_t eocd = bad.size() - 22 - 7;  // before the 7-byte comment
    bad[eocd + 8] = 9, bad[eocd + 10] = 9;
    CHECK_THROWS_WITH(ZipReader(s.file("n.zip", bad), "n.zip"),
                      Catch::Contains("n.zip: the central directory is too small for its 9 entries"));
  }
  SECTION("a UTF-8 flagged name that is not UTF-8") {
    RawMember m{"bad\xff.txt", "x"};
    m.flags = 0x0800;
    CHECK_THROWS_WITH(ZipReader(s.file("u.zip", raw_zip({m})), "u.zip"), Catch::Contains("not UTF-8"));
  }
}

TEST_CASE("zip: random damage gives an error or the original bytes, never a crash", "[pip][zip]") {
  Scratch s;
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "entry " + std::to_string(i * 7919 % 1000) + "\n";
  std::vector<std::tuple<std::string, std::string, int>> files = {
      {"m/a.py", text, 0644}, {"m/b.bin", random_bytes(5000, 2), 0755}, {"m/c.txt", "short", 0644}};
  for (const char* options : {static_cast<const char*>(nullptr), "zip:compression=store"}) {
    const std::string good = libarchive_zip(files, options);
    std::mt19937 r(42);
    for (int round = 0; round < 400; ++round) {
      std::string bad = good;
      for (int k = 0; k < 1 + round % 3; ++k) bad[r() % bad.size()] ^= static_cast<char>(1 + r() % 255);
      try {
        ZipReader z(s.file("f.whl", bad), "f.whl");
        for (const auto& m : z.members()) {
          std::string got = read_all(z, m);
          bool same = false;
          for (const auto& f : files) same = same || got == std::get<1>(f);
          CHECK(same);
        }
      } catch (const Error&) {
      }
    }
  }
}

// Hostile wheels (DESIGN.md, "Trust boundary"): the shapes of zip bombs, and
// headers that disagree, are refused when the archive is opened, before a
// byte is inflated.
namespace {

// A zip made of `body` (local headers and data, laid out by the caller) and
// a central directory listing `entries`, zip64 fields where a value needs them.
struct CentralEntry {
  std::string name;
  uint64_t local_offset = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0, size = 0;
};
std::string local_header(const CentralEntry& e) {
  std::string h;
  bool z64 = e.size >= 0xFFFFFFFF || e.compressed >= 0xFFFFFFFF;
  put32(h, 0x04034b50), put16(h, 45), put16(h, 0), put16(h, e.method), put32(h, 0), put32(h, e.crc);
  put32(h, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.compressed));
  put32(h, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.size));
  put16(h, static_cast<uint16_t>(e.name.size())), put16(h, z64 ? 20 : 0);
  h += e.name;
  if (z64) put16(h, 1), put16(h, 16), put64(h, e.size), put64(h, e.compressed);
  return h;
}
std::string zip_of(const std::string& body, const std::vector<CentralEntry>& entries) {
  std::string cd;
  for (const auto& e : entries) {
    std::string extra;
    bool z64 = e.size >= 0xFFFFFFFF || e.compressed >= 0xFFFFFFFF;
    if (z64) put16(extra, 1), put16(extra, 16), put64(extra, e.size), put64(extra, e.compressed);
    put32(cd, 0x02014b50), put16(cd, 3 << 8 | 45), put16(cd, 45), put16(cd, 0), put16(cd, e.method), put32(cd, 0);
    put32(cd, e.crc);
    put32(cd, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.compressed));
    put32(cd, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.size));
    put16(cd, static_cast<uint16_t>(e.name.size())), put16(cd, static_cast<uint16_t>(extra.size())), put16(cd, 0);
    put16(cd, 0), put16(cd, 0), put32(cd, (S_IFREG | 0644u) << 16), put32(cd, static_cast<uint32_t>(e.local_offset));
    cd += e.name + extra;
  }
  std::string out = body + cd;
  put32(out, 0x06054b50), put16(out, 0), put16(out, 0);
  put16(out, static_cast<uint16_t>(entries.size())), put16(out, static_cast<uint16_t>(entries.size()));
  put32(out, static_cast<uint32_t>(cd.size())), put32(out, static_cast<uint32_t>(body.size())), put16(out, 0);
  return out;
}
std::string raw_deflate(const std::string& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
uint32_t crc_of(const std::string& d) {
  return static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size())));
}

}  // namespace

TEST_CASE("zip: hostile archives are refused before anything is inflated", "[pip][zip][hostile]") {
  Scratch s;
  const std::string zeros(1 << 20, '\0');
  const std::string packed = raw_deflate(zeros);
  CentralEntry one{"pkg/zeros.bin", 0, 8, crc_of(zeros), packed.size(), zeros.size()};
  std::string body = local_header(one) + packed;
  {
    ZipReader ok(s.file("ok.whl", zip_of(body, {one})), "ok.whl");
    REQUIRE(read_all(ok, ok.members().at(0)) == zeros);
  }

  SECTION("many entries naming one compressed body (a quadratic zip bomb's shape)") {
    std::vector<CentralEntry> same(200, one);  // 200 MiB from 1 KiB
    CHECK_THROWS_WITH(ZipReader(s.file("q.whl", zip_of(body, same)), "wheel q.whl"),
                      Catch::Contains("wheel q.whl: 'pkg/zeros.bin'") && Catch::Contains("overlaps"));
  }
  SECTION("a stored member whose bytes hold another member's header and data") {
    CentralEntry inner{"pkg/inner.bin", 0, 8, crc_of(zeros), packed.size(), zeros.size()};
    std::string inner_bytes = local_header(inner) + packed;
    CentralEntry outer{"pkg/outer.bin", 0, 0, crc_of(inner_bytes), inner_bytes.size(), inner_bytes.size()};
    std::string b = local_header(outer);
    inner.local_offset = b.size();
    b += inner_bytes;
    CHECK_THROWS_WITH(ZipReader(s.file("n.whl", zip_of(b, {outer, inner})), "wheel n.whl"),
                      Catch::Contains("'pkg/outer.bin'") && Catch::Contains("overlaps 'pkg/inner.bin'"));
  }
  SECTION("a central entry whose local header names another member") {
    CentralEntry other = one;
    other.name = "pkg/other.bin";
    CHECK_THROWS_WITH(ZipReader(s.file("l.whl", zip_of(body, {other})), "wheel l.whl"),
                      Catch::Contains("'pkg/other.bin': the local header gives the name 'pkg/zeros.bin'"));
  }
  SECTION("local and central headers that disagree on the size") {
    CentralEntry bigger = one;
    bigger.size = zeros.size() * 2;
    CHECK_THROWS_WITH(ZipReader(s.file("s.whl", zip_of(body, {bigger})), "wheel s.whl"),
                      Catch::Contains("the local header gives a size of 1048576, the central directory 2097152"));
  }
  SECTION("a member declaring 2^40 bytes, refused before inflating") {
    CentralEntry huge = one;
    huge.size = uint64_t{1} << 40;
    std::string b = local_header(huge) + packed;
    uint64_t inflated = 0;
    auto open_and_read = [&] {
      ZipReader z(s.file("h.whl", zip_of(b, {huge})), "wheel h.whl");
      z.read(z.members()[0], [&](const char*, size_t n) { inflated += n; });
    };
    CHECK_THROWS_WITH(open_and_read(), Catch::Contains("wheel h.whl: the members declare 1099511627776 bytes") &&
                                           Catch::Contains("STACKBUILD_WHEEL_MAX_INFLATED raises it"));
    CHECK(inflated == 0);
  }
  SECTION("members that declare more than the cap in all") {
    CentralEntry second = one;
    second.name = "pkg/again.bin";
    second.local_offset = body.size();
    std::string b = body + local_header(second) + packed;
    std::string zip = zip_of(b, {one, second});
    CHECK_NOTHROW(ZipReader(s.file("c.whl", zip), "c.whl", SizeLimit{2 << 20, "X"}));
    CHECK_THROWS_WITH(ZipReader(s.file("c.whl", zip), "c.whl", SizeLimit{(2 << 20) - 1, "STACKBUILD_TEST_CAP"}),
                      Catch::Contains("declare 2097152 bytes once inflated (as far as 'pkg/again.bin'), over the "
                                      "2.0 MiB cap (STACKBUILD_TEST_CAP raises it)"));
  }
}

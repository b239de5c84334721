// archive/gzip_stream.hpp: ISA-L inflation of gzip layers, on its own thread or
// inline, against zlib's gzip: members one after another, trailing bytes,
// and each kind of damage.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <random>

#include "archive/gzip_stream.hpp"
#include "helpers.hpp"
#include "util/error.hpp"

using namespace sb;

namespace {

std::string gzip(const std::string& data, int level = 6) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string inflate_all(const fs::path& p, bool own_thread) {
  GzipStream g(p, "layer x.gz", own_thread);
  std::string out;
  for (std::string_view c; !(c = g.next()).empty();) out += c;
  return out;
}

std::string sample(size_t n, unsigned seed) {
  std::mt19937 r(seed);
  std::string s;
  while (s.size() < n) s += "word" + std::to_string(r() % 5000) + (r() % 9 ? " " : "\n");
  s.resize(n);
  return s;
}

}  // namespace

TEST_CASE("gzip stream: inflates what zlib wrote, members one after another, on a thread or inline", "[layer][gzip]") {
  TempDir d;
  const std::string a = sample(5 << 20, 1), b = sample(1234, 2);
  std::mt19937 r(3);
  std::string noise(3 << 20, '\0');
  for (auto& c : noise) c = static_cast<char>(r());
  for (bool own_thread : {true, false}) {
    INFO("own thread: " << own_thread);
    test::write(d.path() / "one.gz", gzip(a));
    CHECK(GzipStream::is_gzip(d.path() / "one.gz"));
    CHECK(inflate_all(d.path() / "one.gz", own_thread) == a);
    test::write(d.path() / "noise.gz", gzip(noise, 1));
    CHECK(inflate_all(d.path() / "noise.gz", own_thread) == noise);
    test::write(d.path() / "two.gz", gzip(a) + gzip(b) + gzip(""));
    CHECK(inflate_all(d.path() / "two.gz", own_thread) == a + b);
    test::write(d.path() / "tail.gz", gzip(b) + std::string(1000, '\0'));  // padding: ignored, as libarchive does
    CHECK(inflate_all(d.path() / "tail.gz", own_thread) == b);
    test::write(d.path() / "empty.gz", gzip(""));
    CHECK(inflate_all(d.path() / "empty.gz", own_thread).empty());
  }
  test::write(d.path() / "plain.tar", a);
  CHECK_FALSE(GzipStream::is_gzip(d.path() / "plain.tar"));
}

TEST_CASE("gzip stream: damage is an error naming the layer, and a reader may stop early", "[layer][gzip]") {
  TempDir d;
  const std::string a = sample(3 << 20, 4);
  const std::string good = gzip(a);
  for (bool own_thread : {true, false}) {
    INFO("own thread: " << own_thread);
    std::string crc = good;
    crc[crc.size() - 6] ^= 1;  // the trailer's CRC-32
    test::write(d.path() / "crc.gz", crc);
    CHECK_THROWS_WITH(inflate_all(d.path() / "crc.gz", own_thread), Catch::Contains("layer x.gz: corrupt gzip data"));
    std::string body = good;
    body[body.size() / 2] ^= 0x5a;
    test::write(d.path() / "body.gz", body);
    CHECK_THROWS_WITH(inflate_all(d.path() / "body.gz", own_thread), Catch::Contains("layer x.gz:"));
    test::write(d.path() / "cut.gz", good.substr(0, good.size() / 3));
    CHECK_THROWS_WITH(inflate_all(d.path() / "cut.gz", own_thread), Catch::Contains("ends early"));
    test::write(d.path() / "zero.gz", "");
    CHECK_THROWS_WITH(inflate_all(d.path() / "zero.gz", own_thread), Catch::Contains("layer x.gz:"));
  }
  // A reader that stops after the first chunk: the thread is stopped and joined.
  test::write(d.path() / "big.gz", good);
  {
    GzipStream g(d.path() / "big.gz", "layer big.gz");
    CHECK_FALSE(g.next().empty());
  }
}

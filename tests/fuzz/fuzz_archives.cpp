// Archives from outside: layer blobs (the safe extractor), wheels (the zip
// reader and the wheel installer), .deb files and gzip streams. Beyond not
// crashing, each must write, chmod or read nothing outside the directory it
// was given (canary.hpp: a canary beside it and one at a fixed host path).
#include "fetch/apt/deb.hpp"
#include "archive/extract.hpp"
#include "archive/gzip_stream.hpp"
#include "canary.hpp"
#include "fuzz.hpp"
#include "fetch/pip/wheel.hpp"
#include "fetch/pip/zip.hpp"

namespace fs = std::filesystem;
using sb::fuzz::Canary;
using sb::fuzz::HostCanary;

// Two layers applied in order onto one root (whiteouts reach the lower one).
SB_FUZZ_TARGET(extract) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  auto parts = sb::fuzz::split(sb::fuzz::text(data, size), 2);
  fs::path root = scratch / "root", l1 = scratch / "layer1", l2 = scratch / "layer2";
  fs::create_directories(root);
  sb::fuzz::write_file(l1, parts[0]);
  sb::fuzz::write_file(l2, parts[1]);
  sb::ExtractOptions options;
  options.max_bytes = 64 << 20;
  options.max_entries = 10'000;
  sb::ExtractStats stats;
  if (sb::fuzz::expect_errors([&] { sb::extract_layer(l1, root, options, stats); }))
    sb::fuzz::expect_errors([&] { sb::extract_layer(l2, root, options, stats); });
  canary.check(scratch, {root, l1, l2});
  host.check();
  sb::fuzz::check_nothing_read(root, &canary, &host);
}

SB_FUZZ_TARGET(gzip) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  fs::path file = scratch / "blob.gz";
  sb::fuzz::write_file(file, sb::fuzz::text(data, size));
  for (bool own_thread : {false, true}) {
    std::string first;
    sb::fuzz::expect_errors([&] {
      sb::GzipStream in(file, "fuzz", own_thread);
      size_t total = 0;
      for (std::string_view chunk = in.next(); !chunk.empty(); chunk = in.next()) {
        total += chunk.size();
        if (total > (256u << 20)) break;  // a bomb: inflating more says nothing new
      }
    });
  }
}

// The zip reader, then the whole wheel installer on the same bytes.
SB_FUZZ_TARGET(wheel) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  fs::path file = scratch / "fuzz-1.0-py3-none-any.whl", root = scratch / "root";
  fs::create_directories(root);
  sb::fuzz::write_file(file, sb::fuzz::text(data, size));
  sb::fuzz::expect_errors([&] {
    sb::pip::ZipReader zip(file, "wheel fuzz");
    for (const auto& m : zip.members()) {
      if (m.size > (64u << 20)) continue;  // a bomb: inflating it says nothing new
      sb::fuzz::expect_errors([&] { zip.read(m, [](const char*, size_t) {}); });
    }
  });
  sb::fuzz::expect_errors([&] {
    sb::pip::Target target;
    sb::pip::PathClaims claims;
    (void)sb::pip::install_wheel(file, file.filename().string(), target, root, true, &claims, 0);
  });
  canary.check(scratch, {root, file});
  host.check();
  sb::fuzz::check_nothing_read(root, &canary, &host);
}

SB_FUZZ_TARGET(deb) {
  const fs::path& scratch = sb::fuzz::fresh_scratch();
  Canary canary(scratch);
  HostCanary host;
  fs::path file = scratch / "fuzz_1.0_amd64.deb", staging = scratch / "staging";
  fs::create_directories(staging);
  sb::fuzz::write_file(file, sb::fuzz::text(data, size));
  sb::fuzz::expect_errors([&] { (void)sb::apt::read_deb(file, staging, 1700000000); });
  canary.check(scratch, {staging, file});
  host.check();
}

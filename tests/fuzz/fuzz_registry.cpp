// What a registry or a user's command line hands the registry client:
// references, WWW-Authenticate challenges, base64, digests, NVIDIA redist
// manifests, the test report label of a pulled image, and the machine's
// registries.conf.
#include "fuzz.hpp"
#include "fetch/redist/manifest.hpp"
#include "registry/auth.hpp"
#include "registry/machine.hpp"
#include "registry/reference.hpp"
#include "util/digest.hpp"
#include "verify/image_tests.hpp"

SB_FUZZ_TARGET(registry) {
  if (size == 0) return;
  const uint8_t kind = data[0] % 5;
  std::string text(sb::fuzz::text(data + 1, size - 1));
  switch (kind) {
    case 0:  // a reference prints as one that parses to itself
      sb::fuzz::expect_errors([&] {
        auto r = sb::registry::Reference::parse(text);
        auto again = sb::registry::Reference::parse(r.str());
        sb::fuzz::check(again.str() == r.str() && again.registry == r.registry && again.repository == r.repository &&
                            again.tag == r.tag,
                        "reference '" + text + "' prints as '" + r.str() + "', which parses differently");
        (void)r.selector();
      });
      break;
    case 1:
      (void)sb::registry::parse_challenge(text);
      break;
    case 2:
      sb::fuzz::expect_errors([&] {
        std::string decoded = sb::registry::base64_decode(text);
        sb::fuzz::check(sb::registry::base64_decode(sb::registry::base64_encode(decoded)) == decoded,
                        "base64 does not round-trip");
      });
      sb::fuzz::expect_errors([&] { (void)sb::Digest::parse(text); });
      break;
    case 3:
      sb::fuzz::expect_errors([&] { (void)sb::redist::parse_manifest(text, "fuzz.json"); });
      break;
    case 4:
      sb::fuzz::expect_errors([&] { (void)sb::verify::parse_tests_label(text); });
      break;
  }
}

// registries.conf (any TOML): read as a main file or a drop-in (or, with bit
// 2 of the first byte, a policy.json); then the
// places a few names would be pulled from. Each list ends with the primary
// location, and nothing but sb::Error comes out.
SB_FUZZ_TARGET(registries_conf) {
  if (size == 0) return;
  const bool drop_in = data[0] & 1;
  std::string text(sb::fuzz::text(data + 1, size - 1));
  if (data[0] & 2) {  // policy.json instead: parsed, then asked about a few names
    sb::fuzz::expect_errors([&] {
      auto policy = sb::registry::Policy::parse(text, "fuzz.json");
      for (const char* n : {"debian:12", "a.b.example.com:5000/x/y:1", "x.io/y@sha256:" "0000000000000000000000000000000000000000000000000000000000000000"})
        sb::fuzz::expect_errors([&] { policy.check(sb::registry::Reference::parse(n)); });
    });
    return;
  }
  sb::registry::RegistriesConf conf;
  bool read = false;
  sb::fuzz::expect_errors([&] {
    conf.add(text, "fuzz.conf", drop_in);
    read = true;
  });
  if (!read) return;
  std::vector<std::string> names = {"debian:12", "docker.io/library/debian@sha256:" + std::string(64, 'a'),
                                    "example.com/foo/image:latest", "a.b.example.com:5000/x/y:1"};
  for (const auto& t : conf.tables())
    if (names.size() < 12) names.push_back(t.prefix.starts_with("*.") ? "x" + t.prefix.substr(1) + "/r:1" : t.prefix + "/r:1");
  for (const auto& n : names) {
    sb::fuzz::expect_errors([&] {
      auto ref = sb::registry::Reference::parse(n);
      auto sources = conf.pull_sources(ref);
      sb::fuzz::check(!sources.empty() && !sources.back().mirror, "the pull sources of " + n + " do not end with the primary");
      (void)conf.push_insecure(ref);
    });
  }
}

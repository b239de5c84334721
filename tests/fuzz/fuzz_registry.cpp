// What a registry or a user's command line hands the registry client:
// references, WWW-Authenticate challenges, base64, digests, NVIDIA redist
// manifests, and the test report label of a pulled image.
#include "fuzz.hpp"
#include "redist/manifest.hpp"
#include "registry/auth.hpp"
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

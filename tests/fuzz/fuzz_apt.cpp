// What an apt archive (a mirror, a snapshot, a file:// repository) or a
// sources list hands us: Release, Packages, control fields, versions.
#include "apt/control.hpp"
#include "apt/index.hpp"
#include "apt/repository.hpp"
#include "apt/solver.hpp"
#include "apt/sources.hpp"
#include "apt/version.hpp"
#include "fuzz.hpp"

namespace {

int sign(int x) { return (x > 0) - (x < 0); }

}  // namespace

SB_FUZZ_TARGET(apt) {
  if (size == 0) return;
  const uint8_t kind = data[0] % 5;
  std::string_view input = sb::fuzz::text(data + 1, size - 1);
  std::string text(input);
  using namespace sb::apt;
  switch (kind) {
    case 0: {  // Packages index, then a solve of a few of its names
      sb::fuzz::expect_errors([&] {
        PackageIndex index("amd64");
        int repo = index.add_repository(Repository{.uri = "file:///fuzz", .suite = "fuzz", .components = {"main"}});
        index.add_packages(repo, text);
        index.finish();
        std::vector<std::string> names;
        for (const auto& p : parse_paragraphs(text)) {
          const std::string& n = p.get("Package");
          if (!n.empty() && names.size() < 4) names.push_back(n);
          for (const auto& alts : parse_depends(p.get("Depends"), "amd64"))
            for (const auto& a : alts) (void)a.str();
        }
        (void)index.essential();
        SolveRequest request;
        request.packages = names;
        request.essential = true;
        request.recommends = (size & 1) != 0;
        (void)solve(index, request);
      });
      break;
    }
    case 1: {  // Release
      sb::fuzz::expect_errors([&] { (void)parse_release(text); });
      break;
    }
    case 2: {  // sources lists, both formats
      sb::fuzz::expect_errors([&] { (void)parse_sources_list(text, "fuzz.list"); });
      sb::fuzz::expect_errors([&] { (void)parse_sources_deb822(text, "fuzz.sources"); });
      break;
    }
    case 3: {  // paragraphs: what str() prints parses back to the same fields
      sb::fuzz::expect_errors([&] {
        auto paragraphs = parse_paragraphs(text, (size & 1) != 0);
        for (const auto& p : paragraphs) {
          auto again = parse_paragraphs(p.str());
          sb::fuzz::check(again.size() == 1 && again[0].fields == p.fields,
                          "a paragraph does not parse back from its own text");
        }
      });
      break;
    }
    case 4: {  // versions: dpkg's order is a total order
      auto parts = sb::fuzz::split(input, 3);
      std::string_view a = parts[0], b = parts[1], c = parts[2];
      sb::fuzz::check(compare_versions(a, a) == 0, "a version differs from itself");
      int ab = sign(compare_versions(a, b)), ba = sign(compare_versions(b, a));
      sb::fuzz::check(ab == -ba, "version order is not antisymmetric");
      int bc = sign(compare_versions(b, c)), ac = sign(compare_versions(a, c));
      if (ab <= 0 && bc <= 0) sb::fuzz::check(ac <= 0, "version order is not transitive");
      sb::fuzz::expect_errors([&] { (void)parse_relation(a); });
      break;
    }
  }
}

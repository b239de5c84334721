// What an apt archive (a mirror, a snapshot, a file:// repository) or a
// sources list hands us: Release, Packages, control fields, versions.
#include "fetch/apt/config.hpp"
#include "fetch/apt/control.hpp"
#include "fetch/apt/index.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/apt/solver.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/apt/version.hpp"
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

namespace {

// A dump that reads back as the same tree: no quotes, blanks, braces, ';'
// or comment starts in a name, and no list item with names below it
// ("T::::a", "::a"), which apt's syntax cannot say again (each "::" makes a
// new item).
bool plain_dump(const std::string& dump) {
  for (size_t pos = 0; pos < dump.size();) {
    size_t nl = dump.find('\n', pos);
    std::string_view line = std::string_view(dump).substr(pos, nl - pos);
    pos = nl == std::string::npos ? dump.size() : nl + 1;
    std::string_view name = line.substr(0, line.find(" \""));
    if (name.empty() || name.find_first_of(" \t\r\"{};#") != std::string_view::npos ||
        name.find("//") != std::string_view::npos || name.find("/*") != std::string_view::npos ||
        name.starts_with("::") || name.find("::::") != std::string_view::npos)
      return false;
  }
  return true;
}

}  // namespace

// apt's own configuration files on the machine (apt.conf, apt.conf.d,
// auth.conf) and logins in repository URLs.
SB_FUZZ_TARGET(apt_config) {
  if (size == 0) return;
  const uint8_t kind = data[0] % 3;
  std::string text(sb::fuzz::text(data + 1, size - 1));
  using namespace sb::apt;
  switch (kind) {
    case 0: {  // apt.conf: what dump() prints reads back to the same tree
      if (text.find("#include") != std::string::npos) return;  // would read the machine's files
      sb::fuzz::expect_errors([&] {
        AptConfig c;
        c.parse(text, "fuzz.conf");
        std::string dump = c.dump();
        if (plain_dump(dump)) {
          AptConfig again;
          again.parse(dump, "dump");
          sb::fuzz::check(again.dump() == dump, "apt.conf: a dump does not read back as the same tree");
        }
        // Proxy-Auto-Detect names a command route() runs: never one the
        // fuzzer made up.
        for (const char* m : {"http", "https"})
          for (const char* k : {"Proxy-Auto-Detect", "ProxyAutoDetect"})
            if (!c.find(std::string("Acquire::") + m + "::" + k).empty()) return;
        AptNetwork net(std::move(c), {});
        for (const char* url : {"https://deb.example/debian/x", "http://deb.example:8080/x"})
          sb::fuzz::expect_errors([&] { (void)net.route(url); });
      });
      break;
    }
    case 1: {  // auth.conf, and the login a URL gets from it
      auto entries = parse_auth_conf(text, "fuzz-auth.conf");
      AptNetwork net(AptConfig(), entries);
      for (const auto& e : entries)
        sb::fuzz::expect_errors([&] { (void)net.route("https://" + e.host + e.path + "/x"); });
      break;
    }
    case 2: {  // a login in a repository URL: taken out once and for all
      sb::fuzz::expect_errors([&] {
        std::string uri = text;
        if (take_url_login(uri)) {
          std::string again = uri;
          sb::fuzz::check(!take_url_login(again) && again == uri, "a URL still holds a login once it was taken out");
        }
      });
      break;
    }
  }
}

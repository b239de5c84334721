// What a Python index and a wheel's METADATA hand us: index pages (JSON and
// HTML), versions, specifiers, requirements, markers, wheel file names.
#include "fuzz.hpp"
#include "fetch/pip/index.hpp"
#include "fetch/pip/requirement.hpp"
#include "fetch/pip/tags.hpp"
#include "fetch/pip/version.hpp"

SB_FUZZ_TARGET(pip) {
  if (size == 0) return;
  const uint8_t kind = data[0] % 6;
  std::string text(sb::fuzz::text(data + 1, size - 1));
  using namespace sb::pip;
  const std::string page_url = "https://index.invalid/simple/fuzz/";
  switch (kind) {
    case 0:
      sb::fuzz::expect_errors([&] { (void)parse_json_page(text, page_url); });
      break;
    case 1:
      sb::fuzz::expect_errors([&] { (void)parse_html_page(text, page_url); });
      break;
    case 2: {  // a version prints in a form that parses to the same version
      if (auto v = Version::try_parse(text)) {
        auto again = Version::try_parse(v->str());
        sb::fuzz::check(again && *again == *v && again->str() == v->str(),
                        "version '" + text + "' prints as '" + v->str() + "', which is not the same version");
        (void)v->public_version().str();
        (void)v->base_version().str();
      }
      break;
    }
    case 3: {  // requirements, and their markers evaluated
      sb::fuzz::expect_errors([&] {
        Requirement r = Requirement::parse(text);
        Requirement again = Requirement::parse(r.str());
        sb::fuzz::check(again.str() == r.str(), "requirement '" + text + "' prints as '" + r.str() +
                                                    "', which parses as '" + again.str() + "'");
        (void)r.applies(MarkerEnv::linux_cpython("3.12", "x86_64"), {"cuda"});
      });
      break;
    }
    case 4: {  // specifier sets against a version
      auto parts = sb::fuzz::split(text, 2);
      sb::fuzz::expect_errors([&] {
        SpecifierSet s = SpecifierSet::parse(parts[0]);
        SpecifierSet again = SpecifierSet::parse(s.str());
        sb::fuzz::check(again.str() == s.str(), "specifier '" + parts[0] + "' does not parse back from '" + s.str() + "'");
        if (auto v = Version::try_parse(parts[1])) {
          sb::fuzz::check(s.contains(*v, true) == again.contains(*v, true), "a reparsed specifier matches differently");
          (void)s.contains(*v, false);
        }
      });
      break;
    }
    case 5: {  // wheel names and METADATA
      (void)WheelName::parse(text);
      sb::fuzz::expect_errors([&] { (void)parse_metadata(text); });
      break;
    }
  }
}

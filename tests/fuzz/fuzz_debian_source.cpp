// What a Debian archive hands the Debian source kind: a .dsc (clearsigned or
// not; its fields checked against what the index said) and the lockfile
// entry that pins one.
#include <nlohmann/json.hpp>

#include "fetch/apt/control.hpp"
#include "fetch/apt/repository.hpp"
#include "fetch/source/debian.hpp"
#include "fuzz.hpp"

SB_FUZZ_TARGET(debian_source) {
  if (size == 0) return;
  const bool as_lock = data[0] & 1;
  std::string text(sb::fuzz::text(data + 1, size - 1));
  if (as_lock) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return;
    sb::fuzz::expect_errors([&] {
      sb::source::DebianSource s;
      try {
        sb::source::from_json(j, s);
      } catch (const nlohmann::json::exception& e) {
        throw sb::Error(e.what());  // a missing or mistyped field: refused
      }
      for (const auto& f : s.files)
        if (f.name.find('/') != std::string::npos) throw std::logic_error("a pinned name with a '/'");
      nlohmann::json again = s;
      sb::source::DebianSource back;
      sb::source::from_json(again, back);
      if (nlohmann::json(back) != again) throw std::logic_error("to_json/from_json do not round-trip");
    });
    return;
  }
  sb::fuzz::expect_errors([&] {
    sb::source::DebianSource s;
    auto paragraphs = sb::apt::parse_paragraphs(sb::apt::strip_clearsign(text));
    if (!paragraphs.empty()) {
      s.name = paragraphs.front().get("Source");
      s.version = paragraphs.front().get("Version");
    }
    s.dsc.name = "fuzz.dsc";
    sb::source::read_dsc(text, s);
    for (const auto& f : s.files)
      if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "..")
        throw std::logic_error("a .dsc file name that is not a plain name was taken: " + f.name);
  });
}

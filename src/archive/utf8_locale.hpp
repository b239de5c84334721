// libarchive translates names between the locale's charset and the UTF-8 that
// pax headers hold; in the "C" locale any non-ASCII name fails (or crashes
// the pax writer). Paths on Linux are bytes, UTF-8 in practice, so the layer
// code runs under C.UTF-8, set for the current thread only, for its scope.
#pragma once

#include <locale.h>
#include <clocale>

namespace sb {

class Utf8Locale {
 public:
  Utf8Locale() {
    utf8_ = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
    if (utf8_) old_ = ::uselocale(utf8_);
  }
  ~Utf8Locale() {
    if (!utf8_) return;
    ::uselocale(old_);
    ::freelocale(utf8_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

 private:
  locale_t utf8_ = static_cast<locale_t>(0);
  locale_t old_ = static_cast<locale_t>(0);
};

}  // namespace sb

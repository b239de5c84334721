// Two of libarchive's answers that may be NULL, where every caller wants text.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <string>

#include "util/error.hpp"

namespace sb {

// Why the last call on `a` failed. libarchive sets no message for some
// failures (a truncated ar member, say), and then gives NULL.
inline std::string archive_why(struct archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "unreadable (libarchive gives no reason)";
}

// The entry's path as stored. NULL from libarchive (an entry with no name) is
// an error naming `what`, rather than a path read from address 0.
inline std::string entry_path(struct archive_entry* e, const std::string& what) {
  const char* p = archive_entry_pathname(e);
  if (!p) throw Error(what + ": an entry without a name");
  return p;
}

// A name in an entry (its path, hardlink or symlink target) as archived:
// libarchive's UTF-8 form or, for a name that is not UTF-8 (raw bytes in a
// GNU or ustar header, a pax header with hdrcharset=BINARY), which it gives
// only in the locale's form, those bytes. NULL when the entry has none.
// Call with the UTF-8 and the plain getter of one name, under Utf8Locale.
inline const char* archived_name(const char* utf8, const char* raw) {
  return utf8 ? utf8 : raw;
}

}  // namespace sb

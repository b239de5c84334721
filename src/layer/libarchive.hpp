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

}  // namespace sb

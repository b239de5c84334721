// Shell-style globs over '/'-separated paths, as .gitignore and auditwheel's
// exclusions write them: '*' any characters and '?' one character within a
// path component, [abc], [a-z] and [!a-z] a character class, '**' as a whole
// component any number of components (none included), '\' quotes the next
// character.
#pragma once

#include <string>
#include <string_view>

namespace sb {

// Why `pattern` is not a glob ("an unclosed '['", ...), or "" when it is one.
std::string glob_error(std::string_view pattern);

// Whether `path` matches `pattern` as a whole. A pattern with a glob_error
// matches nothing.
bool glob_match(std::string_view pattern, std::string_view path);

}  // namespace sb

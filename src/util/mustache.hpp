// Mustache templates (kainjow's mustache, from Debian) rendered with JSON
// data: the release notes (image/notes.hpp) and the CI files `stackbuild
// cluster` writes (pipeline/cluster_ci.hpp).
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace sb {

// `tmpl` rendered with `data` (objects, lists, strings and booleans as
// Mustache sees them; null and "" are absent, so false; numbers as text).
// {{name}} writes a value through `escape`, {{{name}}} as it is. Throws
// Error(ErrorKind::Input) naming `template_name` when the template is malformed.
std::string render_mustache(const std::string& tmpl, const nlohmann::json& data, const std::string& template_name,
                            const std::function<std::string(const std::string&)>& escape);

}  // namespace sb

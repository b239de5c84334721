#include "util/mustache.hpp"

#include <kainjow/mustache.hpp>

#include "util/error.hpp"

namespace sb {

namespace {

using json = nlohmann::json;

kainjow::mustache::data to_data(const json& j) {
  using kainjow::mustache::data;
  switch (j.type()) {
    case json::value_t::object: {
      data d{data::type::object};
      for (const auto& [k, v] : j.items()) {
        if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) continue;
        d.set(k, to_data(v));
      }
      return d;
    }
    case json::value_t::array: {
      data d{data::type::list};
      for (const auto& v : j) d.push_back(to_data(v));
      return d;
    }
    case json::value_t::string:
      return data(j.get<std::string>());
    case json::value_t::boolean:
      return data(j.get<bool>());
    case json::value_t::null:
      return data(false);
    default:
      return data(j.dump());
  }
}

}  // namespace

std::string render_mustache(const std::string& tmpl, const json& data, const std::string& template_name,
                            const std::function<std::string(const std::string&)>& escape) {
  kainjow::mustache::mustache m{tmpl};
  if (!m.is_valid()) throw Error(template_name + ": " + m.error_message(), ErrorKind::Input);
  m.set_custom_escape(escape);
  std::string out = m.render(to_data(data));
  if (!m.is_valid()) throw Error(template_name + ": " + m.error_message(), ErrorKind::Input);
  return out;
}

}  // namespace sb

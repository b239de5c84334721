#include "registry/tags.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "registry/reference.hpp"
#include "util/limits.hpp"
#include "util/text.hpp"

namespace sb::registry {

using json = nlohmann::json;

std::string next_link(const std::string& header) {
  // Links are "<target>; param; param, <target>; ...": a target may hold
  // commas and semicolons, so each is read between its brackets.
  for (size_t at = 0; (at = header.find('<', at)) != std::string::npos;) {
    size_t close = header.find('>', at);
    if (close == std::string::npos) return "";
    std::string target = header.substr(at + 1, close - at - 1);
    size_t end = std::min(header.find('<', close), header.size());
    std::string params = ascii_lower(header.substr(close + 1, end - close - 1));
    for (size_t p = 0; (p = params.find("rel", p)) != std::string::npos; p += 3) {
      size_t v = params.find_first_not_of(" \t", p + 3);
      if (v == std::string::npos || params[v] != '=') continue;
      v = params.find_first_not_of(" \t", v + 1);
      if (v == std::string::npos) break;
      std::string value = params.substr(v, params.find_first_of(";,", v) - v);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
        value = value.substr(1, value.size() - 2);
      // rel may name several relations: rel="next last".
      for (size_t w = 0; w < value.size();) {
        size_t e = std::min(value.find(' ', w), value.size());
        if (value.substr(w, e - w) == "next") return target;
        w = e + 1;
      }
    }
    at = close + 1;
  }
  return "";
}

std::optional<TagListing> list_tags(Session& s, http::Client& c, const std::string& repo,
                                    size_t max_tags, size_t page_size) {
  TagListing out;
  const std::string list_url = s.url("/v2/" + repo + "/tags/list");
  std::string url = list_url + "?n=" + std::to_string(page_size);
  std::set<std::string> seen_urls, seen_tags;
  for (;;) {
    seen_urls.insert(url);
    http::Request req{
        .url = url, .max_body = limits::registry_document(), .follow_redirects = false};
    req.headers.push_back("Accept: application/json");
    http::Response r;
    try {
      r = s.send(c, req);
    } catch (const http::HttpError&) {
      throw;
    } catch (const Error& e) {  // over the cap (http's words): named after the operation
      throw Error(s.op() + ": the tag list of " + repo + ": " + e.what());
    }
    // A registry that does not list tags, or not to us: the listing is optional.
    if (r.status == 401 || r.status == 403 || r.status == 404 || r.status == 405 ||
        r.status == 501 || r.status / 100 == 3) {
      if (out.tags.empty()) return std::nullopt;
      s.fail(r, "listing the tags of " + repo + " (page " + std::to_string(seen_urls.size()) + ")");
    }
    if (r.status != 200) s.fail(r, "listing the tags of " + repo);
    json page;
    try {
      page = json::parse(r.body);
    } catch (const json::exception& e) {
      throw Error(s.op() + ": the tag list of " + repo + " is not JSON: " + e.what());
    }
    if (!page.is_object() || !page.contains("tags") ||
        !(page["tags"].is_array() || page["tags"].is_null()))
      throw Error(s.op() + ": the tag list of " + repo +
                  " is not a tag list ({\"name\", \"tags\": [...]})");
    const size_t before = out.tags.size() + out.not_tags;
    if (page["tags"].is_array())
      for (const auto& t : page["tags"]) {
        if (!t.is_string() || !valid_tag(t.get<std::string>())) {
          if (!out.not_tags++) out.first_not_tag = t.dump().substr(0, 140);
          continue;
        }
        if (!seen_tags.insert(t.get<std::string>()).second) continue;
        if (out.tags.size() == max_tags) {
          out.truncated = true;
          return out;
        }
        out.tags.push_back(t.get<std::string>());
      }
    std::string next = next_link(r.header("link"));
    if (next.empty()) return out;
    if (out.tags.size() + out.not_tags == before)
      throw Error(s.op() + ": the tag list of " + repo +
                  " links on from a page that added no tag (" + next.substr(0, 200) +
                  "); not following it");
    // Only this registry's tag list of this repository: a link elsewhere is
    // never followed (a token or credentials could go with it).
    std::string resolved = next.starts_with("/") ? s.url(next) : next;
    if (!resolved.starts_with(list_url) ||
        (resolved.size() > list_url.size() && resolved[list_url.size()] != '?'))
      throw Error(s.op() + ": the tag list of " + repo + " links its next page to " +
                  next.substr(0, 200) + ", which is not this registry's tag list of " + repo +
                  "; not following it");
    if (seen_urls.count(resolved))
      throw Error(s.op() + ": the tag list of " + repo + " links back to a page it gave (" +
                  next.substr(0, 200) + "); not following it");
    url = resolved;
  }
}

}  // namespace sb::registry

// A repository's tags (distribution spec: GET /v2/<name>/tags/list), page by
// page as the registry's Link headers lead. The build cache reads its points'
// own tags so (pipeline/registry_cache.hpp).
//
// What a registry answers is not trusted: each page is capped in size
// (limits::registry_document()), names that are not tags are left out, and a
// next page is followed only to the same registry's tag list of the same
// repository, never to another host.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "registry/session.hpp"

namespace sb::registry {

struct TagListing {
  std::vector<std::string> tags;  // in the registry's order
  size_t not_tags = 0;            // names left out: not a tag by the grammar
  std::string first_not_tag;      // the first of them, for a message
  bool truncated = false;         // stopped at max_tags
};

// The tags of `repo`, at most `max_tags`, asked for `page_size` a page (n=).
// nullopt when the registry does not list them: 401, 403, 404, 405, 501 or a
// redirect (the listing is optional). Throws sb::Error naming the session's
// op for a page that is not a tag list or is over the cap, for a next link to
// another host or path, and for links that lead in a circle.
std::optional<TagListing> list_tags(Session& session, http::Client& client, const std::string& repo,
                                    size_t max_tags, size_t page_size = 1000);

// The target of a Link header's rel="next" (RFC 8288): `</v2/a/tags/list?n=2&last=b>; rel="next"`
// gives "/v2/a/tags/list?n=2&last=b"; "" when it has none.
std::string next_link(const std::string& link_header);

}  // namespace sb::registry

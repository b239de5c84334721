#include "registry/reference.hpp"

#include <algorithm>
#include <cctype>

#include "util/error.hpp"

namespace sb::registry {

static bool valid_repository(const std::string& r) {
  if (r.empty()) return false;
  for (char c : r)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '/' || c == '.' || c == '_' || c == '-'))
      return false;
  return r.front() != '/' && r.back() != '/' && r.find("//") == std::string::npos;
}

bool valid_tag(const std::string& t) {
  if (t.empty() || t.size() > 128 || t[0] == '.' || t[0] == '-') return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

Reference Reference::parse(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Error("'" + text + "' is not an image reference (REGISTRY/REPO[:TAG|@DIGEST]): " + why, ErrorKind::Usage);
  };
  Reference r;
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos) {
    try {
      r.digest = Digest::parse(rest.substr(at + 1));
    } catch (const Error&) {
      throw bad("the digest is not sha256:<64 hex digits>");
    }
    rest = rest.substr(0, at);
  }
  auto slash = rest.find('/');
  std::string first = slash == std::string::npos ? "" : rest.substr(0, slash);
  if (!first.empty() && (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                         first == "localhost")) {
    r.registry = first;
    rest = rest.substr(slash + 1);
  } else {
    r.registry = "registry-1.docker.io";
  }
  auto colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
    r.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (!valid_tag(r.tag)) throw bad("'" + r.tag + "' is not a valid tag");
  }
  if (r.registry == "docker.io" || r.registry == "index.docker.io") r.registry = "registry-1.docker.io";
  if (r.registry == "registry-1.docker.io" && rest.find('/') == std::string::npos) rest = "library/" + rest;
  if (!valid_repository(rest)) throw bad("'" + rest + "' is not a valid repository name (lower case, digits, ._-/)");
  r.repository = rest;
  return r;
}

std::string Reference::str() const {
  std::string s = name();
  if (!tag.empty()) s += ":" + tag;
  if (digest) s += "@" + digest->str();
  return s;
}

std::string Reference::selector() const {
  if (digest) return digest->str();
  return tag.empty() ? "latest" : tag;
}

static std::string host_of(const std::string& registry) {
  if (!registry.empty() && registry[0] == '[') return registry.substr(0, registry.find(']') + 1);
  return registry.substr(0, registry.find(':'));
}

bool is_local(const std::string& registry) {
  std::string h = host_of(registry);
  return h == "localhost" || h == "127.0.0.1" || h == "[::1]";
}

bool listed(const std::string& registry, const std::vector<std::string>& insecure) {
  for (const auto& i : insecure)
    if (i == registry || i == host_of(registry)) return true;
  return false;
}

}  // namespace sb::registry

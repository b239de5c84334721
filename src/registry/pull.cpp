#include "registry/pull.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "registry/push.hpp"
#include "registry/referrers.hpp"
#include "util/threads.hpp"

namespace sb::registry {

using json = nlohmann::json;

void parse_platform(const std::string& text, PullOptions& o) {
  auto a = text.find('/');
  if (a == std::string::npos || a == 0 || a + 1 == text.size())
    throw Error("--platform wants OS/ARCH[/VARIANT] (e.g. linux/arm64), not '" + text + "'", ErrorKind::Usage);
  o.os = text.substr(0, a);
  auto b = text.find('/', a + 1);
  o.architecture = text.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  o.variant = b == std::string::npos ? "" : text.substr(b + 1);
}

namespace {

const char* const kAccept =
    "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json";

}  // namespace

std::optional<FetchedManifest> fetch_manifest(Session& s, http::Client& c, const std::string& repo,
                                              const std::string& selector, const std::optional<Digest>& pinned,
                                              bool missing_ok) {
  http::Request req{.url = s.url("/v2/" + repo + "/manifests/" + selector), .max_body = limits::registry_document()};
  req.headers.push_back(kAccept);
  http::Response r;
  try {
    r = s.send(c, req);
  } catch (const http::HttpError&) {
    throw;
  } catch (const Error& e) {  // over the cap (http's words): named after the operation
    if (std::string_view(e.what()).starts_with(s.op() + ":")) throw;
    throw Error(s.op() + ": " + e.what());
  }
  if (r.status == 404 && missing_ok) return std::nullopt;
  if (r.status != 200) s.fail(r, "fetching manifest " + selector);
  Digest d = Digest::of_bytes(r.body);
  if (pinned && d != *pinned)
    throw Error(s.op() + ": manifest " + pinned->str() + " arrived with digest " + d.str() + "; refusing it");
  std::string said = r.header("docker-content-digest");
  if (!said.empty() && said.rfind("sha256:", 0) == 0 && said != d.str())
    throw Error(s.op() + ": the registry says manifest " + selector + " is " + said + ", but its bytes hash to " +
                d.str() + "; refusing it");
  std::string type = r.header("content-type");
  type = type.substr(0, type.find(';'));
  try {
    json j = json::parse(r.body);
    if (j.contains("mediaType") && j["mediaType"].is_string()) type = j["mediaType"].get<std::string>();
    else if (type.empty() || type == "application/json") type = j.contains("manifests") ? kMediaTypeIndex : kMediaTypeManifest;
  } catch (const json::exception& e) {
    throw Error(s.op() + ": manifest " + selector + " is not JSON: " + e.what());
  }
  if (type.find("manifest.v1+prettyjws") != std::string::npos || type == "application/vnd.docker.distribution.manifest.v1+json")
    throw Error(s.op() + ": manifest " + selector + " is Docker schema 1, which stackbuild does not read");
  return FetchedManifest{type, r.body, d};
}

uint64_t fetch_blob(Session& s, http::Client& c, const std::string& repo, const Digest& d, uint64_t size,
                  const Store& store, int task) {
  uint64_t fetched = 0;
  for (int attempt = 1;; ++attempt) {
    Store::Writer w = store.writer();
    try {
      for (int failures = 0;;) {
        http::Request req{.url = s.url("/v2/" + repo + "/blobs/" + d.str())};
        uint64_t have = w.bytes_written();
        if (have) req.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
        req.on_data = [&](const char* p, size_t n) {
          // The descriptor's size bounds what is written: a registry that sends more is not let fill the disk.
          if (size && w.bytes_written() + n > size)
            throw Error("blob " + d.str() + ": the registry sends more than the " + std::to_string(size) +
                        " bytes its descriptor gives");
          w.write(p, n);
          fetched += n;
          s.status().task_progress(task, w.bytes_written());
        };
        try {
          auto r = s.send(c, req);
          if (r.status == 200 && have) throw Error("the registry ignored a Range request");  // caught below: start again
          if (r.status != 200 && r.status != 206) s.fail(r, "fetching blob " + d.str());
          break;
        } catch (const http::HttpError& e) {
          if (!e.transient() || ++failures >= s.retry_policy().attempts) throw;
          s.note_retry(std::string(e.what()) + "; resuming blob " + d.str().substr(0, 19) + " at " +
                       human_bytes(static_cast<double>(w.bytes_written())));
          std::this_thread::sleep_for(std::chrono::milliseconds(200 * failures));
        }
      }
      if (size && w.bytes_written() != size)
        throw Error("blob " + d.str() + " has " + std::to_string(w.bytes_written()) + " bytes, not " + std::to_string(size));
      w.commit(d);  // checks the digest before the blob enters the store
      return fetched;
    } catch (const RegistryError&) {
      throw;
    } catch (const http::HttpError&) {
      throw;
    } catch (const Error& e) {
      if (attempt >= 2) throw Error(s.op() + ": " + e.what());
      s.note_retry(std::string(e.what()) + "; fetching blob " + d.str().substr(0, 19) + " again");
    }
  }
}

namespace {

FetchedManifest get_manifest(Session& s, http::Client& c, const std::string& repo, const std::string& selector,
                             const std::optional<Digest>& pinned) {
  return *fetch_manifest(s, c, repo, selector, pinned, false);
}

// An index's manifests, in place (a copy would lose the path an error names:
// /manifests/0/digest); an empty list when it has none.
const json& index_manifests(const json& idx) {
  static const json none = json::array();
  return idx.is_object() && idx.contains("manifests") ? idx["manifests"] : none;
}

bool platform_matches(const json& p, const PullOptions& o) {
  return p.value("os", "") == o.os && p.value("architecture", "") == o.architecture &&
         (o.variant.empty() || p.value("variant", "") == o.variant);
}

}  // namespace

namespace {

// The pull from one place, `ref` naming the image there; sets `found` once
// the manifest is there.
PullResult pull_from(Session& s, const Reference& ref, const Store& store, const PullOptions& o, Status& status,
                     bool& found) {
  const std::string& repo = ref.repository;
  {
    auto client = s.make_client();
    FetchedManifest top = get_manifest(s, *client, repo, ref.selector(), ref.digest);
    found = true;
    FetchedManifest m = top;
    if (top.media_type == kMediaTypeIndex || top.media_type == kDockerManifestList) {
      json idx = json::parse(top.bytes);
      std::optional<Digest> chosen;
      std::string have, chosen_platform, several;
      // The images of the chosen entry's exact platform (os, architecture,
      // variant, os.version), by digest: one listed twice is one. Several
      // (a build's matrix index: one image per point) leave nothing to choose by.
      std::set<std::string> same;
      auto exact = [](const json& p) { return p.dump(); };
      for (const auto& e : index_manifests(idx)) {
        if (e.contains("artifactType")) continue;  // an SBOM or report listed beside its image
        json p = e.value("platform", json::object());
        have += (have.empty() ? "" : ", ") + p.value("os", "?") + "/" + p.value("architecture", "?") +
                (p.contains("variant") ? "/" + p.value("variant", "") : "");
        if (!platform_matches(p, o)) continue;
        if (!chosen) {
          chosen = Digest::parse(e.at("digest").get<std::string>());
          chosen_platform = exact(p);
        }
        if (exact(p) != chosen_platform || !same.insert(e.value("digest", "")).second) continue;
        json a = e.value("annotations", json::object());
        std::string tags = a.is_object() ? a.value("dev.stackbuild.tags", "") : "";
        several += "\n  " + e.value("digest", "?") + (tags.empty() ? "" : " (" + tags + ")");
      }
      std::string want = o.os + "/" + o.architecture + (o.variant.empty() ? "" : "/" + o.variant);
      if (!chosen) throw Error(s.op() + ": " + ref.str() + " has no image for " + want + " (it has: " + have + ")");
      if (same.size() > 1)
        throw Error(s.op() + ": " + ref.str() + " lists " + std::to_string(same.size()) + " images for " + want +
                    " (a matrix index, one image per point, not one per platform); name one by its tag or " +
                    ref.name() + "@DIGEST:" + several);
      m = get_manifest(s, *client, repo, chosen->str(), *chosen);
    }
    json man = json::parse(m.bytes);
    std::vector<std::pair<Digest, uint64_t>> blobs;
    const json& cd = man.at("config");
    blobs.emplace_back(Digest::parse(cd.at("digest").get<std::string>()), cd.value("size", uint64_t{0}));
    for (const auto& l : man.at("layers"))
      blobs.emplace_back(Digest::parse(l.at("digest").get<std::string>()), l.value("size", uint64_t{0}));

    PullResult result{Image{{}, "", Descriptor{cd.value("mediaType", ""), blobs[0].first, blobs[0].second, {}, {}}, m.bytes,
                            Descriptor{m.media_type, m.digest, m.bytes.size(), {}, {}}},
                      top.digest, 0};
    std::mutex mu;
    // Fetches blob i into the store, unless it is there.
    auto fetch = [&](http::Client& c, size_t i) {
      auto [d, size] = blobs[i];
      if (store.has(d)) return;
      int task = status.task_begin(
          "blob " + d.str().substr(0, 19) + " " + human_bytes(static_cast<double>(size)), size);
      uint64_t n;
      try {
        n = fetch_blob(s, c, repo, d, size, store, task);
      } catch (...) {
        status.task_end(task, "failed");  // no progress bar left behind
        throw;
      }
      status.task_end(task, "fetched " + human_bytes(static_cast<double>(n)));
      remember_repository(store, ref.registry, d, repo);
      std::lock_guard lk(mu);
      result.bytes_fetched += n;
    };
    // The config first: one that does not describe the layers is refused
    // before they are fetched.
    fetch(*client, 0);
    result.image.config_json = store.read(blobs[0].first);
    // Each layer's diff_id (the digest of its uncompressed tar) is the
    // config's, one for each layer, as umoci and the OCI spec have it.
    const std::string config = s.op() + ": config " + blobs[0].first.str() + " of " + ref.str();
    std::vector<Digest> diff_ids =
        read_diff_ids(parse_config_document(result.image.config_json, config), config);
    const json& layers = man.at("layers");
    if (diff_ids.size() != layers.size())
      throw Error(config + " lists " + std::to_string(diff_ids.size()) + " diff_ids for " +
                  std::to_string(layers.size()) + " layers; refusing it");
    std::atomic<size_t> next{1};
    std::exception_ptr error;  // under mu
    std::atomic<bool> stop{false};  // what the workers read, without mu
    auto worker = [&] {
      try {
        auto c = s.make_client();
        for (size_t i; !stop && (i = next++) < blobs.size();) fetch(*c, i);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!error) error = std::current_exception();
        stop = true;
      }
    };
    client.reset();  // its connection and curl's socketpair: 3 descriptors the workers can use
    int n =
        usable_connections(std::max(1, std::min<int>(o.jobs, static_cast<int>(blobs.size() - 1))));
    run_on_threads(static_cast<size_t>(n), worker);
    if (error) std::rethrow_exception(error);

    for (size_t i = 0; i < layers.size(); ++i) {
      Layer l{diff_ids[i], blobs[i + 1].first, blobs[i + 1].second, 0, layers[i].value("mediaType", "")};
      l.annotations = chunked_annotations(layers[i]);  // a chunked format's TOC, checked; nothing else
      result.image.layers.push_back(std::move(l));
    }
    return result;
  }
}

// Runs `attempt` on each place `ref` may be pulled from (pull_targets()) until
// one finds the manifest: `attempt` sets `found` once it has it, and what
// fails after that is not tried elsewhere. With one place its error is the
// error; with several, the primary's, with what each mirror said.
template <class T>
T from_each_target(const Reference& ref, const SessionOptions& options, Status& status,
                   const std::function<T(Session&, const Reference&, bool& found)>& attempt) {
  std::vector<PullTarget> targets = pull_targets(ref, options);
  std::string mirrors_said;
  for (size_t i = 0; i < targets.size(); ++i) {
    const PullTarget& t = targets[i];
    Session s(t.ref.registry, t.op, t.options, status, t.ref.repository);
    s.add_scope(t.ref.repository, "pull");
    if (t.mirror) status.message(Level::Info, t.op + ": trying the mirror");
    else if (t.ref.name() != ref.name()) status.message(Level::Info, t.op + ": the location registries.conf gives");
    bool found = false;
    try {
      try {
        return attempt(s, t.ref, found);
      } catch (const http::HttpError& e) {
        throw Error(s.op() + ": " + e.what());
      } catch (const json::exception& e) {
        throw Error(s.op() + ": a malformed manifest: " + e.what());
      }
    } catch (const Error& e) {
      if (found || i + 1 == targets.size()) {
        if (found || mirrors_said.empty()) throw;
        throw Error(std::string(e.what()) + " (the mirrors failed too: " + mirrors_said + ")");
      }
      status.message(Level::Info, std::string(e.what()) + "; trying the next place");
      mirrors_said += (mirrors_said.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  throw Error("pull from " + ref.name() + ": nowhere to pull it from");  // not reached: the primary is always last
}

}  // namespace

Digest resolve_digest(const Reference& ref, const SessionOptions& options, Status& status) {
  return from_each_target<Digest>(ref, options, status, [](Session& s, const Reference& at, bool& found) {
    auto client = s.make_client();
    Digest d = get_manifest(s, *client, at.repository, at.selector(), at.digest).digest;
    found = true;
    return d;
  });
}

PullResult pull_image(const Reference& ref, const Store& store, const PullOptions& o, Status& status) {
  return from_each_target<PullResult>(ref, o.session, status, [&](Session& s, const Reference& at, bool& found) {
    return pull_from(s, at, store, o, status, found);
  });
}

namespace {

constexpr uint64_t kMaxArtifactFile = 64ull << 20;  // an SBOM or a report, not a layer

std::map<std::string, std::string> string_map(const json& j) {
  std::map<std::string, std::string> out;
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

// A blob of `repo` (a config, an artifact's file), through the store.
std::string read_blob(Session& s, http::Client& c, const std::string& repo, const json& descriptor,
                      const Store& store, Status& status) {
  Digest d = Digest::parse(descriptor.at("digest").get<std::string>());
  uint64_t size = descriptor.value("size", uint64_t{0});
  if (size > kMaxArtifactFile)
    throw Error(s.op() + ": blob " + d.str() + " is " + human_bytes(static_cast<double>(size)) +
                ", more than a config or an artifact's file holds; not reading it");
  if (!store.has(d)) {
    int task = status.task_begin("blob " + d.str().substr(0, 19), size);
    try {
      fetch_blob(s, c, repo, d, size, store, task);
    } catch (...) {
      status.task_end(task, "failed");
      throw;
    }
    status.task_end(task, "");
  }
  return store.read(d);
}

bool index_media_type(const std::string& media_type) {
  return media_type == kMediaTypeIndex || media_type == kDockerManifestList;
}

}  // namespace

Listing list_images(const Reference& ref, const Store& store, const SessionOptions& options, Status& status,
                    const std::set<std::string>& artifact_types) {
  return from_each_target<Listing>(ref, options, status, [&](Session& s, const Reference& at, bool& found) {
    const std::string& repo = at.repository;
    auto client = s.make_client();
    Listing out{get_manifest(s, *client, repo, at.selector(), at.digest), {}, {}};
    found = true;
    std::vector<std::pair<Digest, json>> children;  // (digest, descriptor)
    if (index_media_type(out.top.media_type)) {
      json idx = json::parse(out.top.bytes);
      out.annotations = string_map(idx.value("annotations", json::object()));
      for (const auto& e : index_manifests(idx)) {
        if (e.contains("artifactType")) continue;  // an SBOM or a report listed beside its image
        std::string type = e.value("mediaType", "");
        if (index_media_type(type)) continue;  // an index of indexes: not an image
        children.emplace_back(Digest::parse(e.at("digest").get<std::string>()), e);
      }
    } else {
      children.emplace_back(out.top.digest, json::object());
    }
    for (const auto& [d, descriptor] : children) {
      ListedImage li{.manifest = d == out.top.digest ? out.top : get_manifest(s, *client, repo, d.str(), d)};
      json man = json::parse(li.manifest.bytes);
      if (!man.contains("config") || !man.contains("layers") || man.contains("artifactType") ||
          man["config"].value("mediaType", "") == kMediaTypeEmpty)
        continue;  // an artifact, not an image
      li.config_json = read_blob(s, *client, repo, man.at("config"), store, status);
      li.annotations = string_map(descriptor.value("annotations", json::object()));
      li.platform = string_map(descriptor.value("platform", json::object()));
      if (!artifact_types.empty()) {
        for (const auto& r : list_referrers(s, *client, repo, d)) {
          std::string type = r.value("artifactType", "");
          if (!artifact_types.count(type)) continue;
          Digest ad = Digest::parse(r.at("digest").get<std::string>());
          json art = json::parse(get_manifest(s, *client, repo, ad.str(), ad).bytes);
          const json& layers = art.value("layers", json::array());
          if (layers.size() != 1) continue;  // not an artifact of one file, as stackbuild writes them
          li.artifacts.push_back({type, ad, read_blob(s, *client, repo, layers[0], store, status),
                                  string_map(art.value("annotations", json::object()))});
        }
      }
      out.images.push_back(std::move(li));
    }
    return out;
  });
}

}  // namespace sb::registry

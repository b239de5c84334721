#include "registry/push.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "util/file.hpp"
#include "util/threads.hpp"

namespace sb::registry {

using json = nlohmann::json;

static bool is_index(const std::string& media_type) {
  return media_type == kMediaTypeIndex || media_type == "application/vnd.docker.distribution.manifest.list.v2+json";
}

std::vector<LayoutEntry> layout_entries(const fs::path& dir) {
  fs::path index = dir / "index.json";
  if (!fs::exists(index)) throw Error(dir.string() + " is not an OCI image layout (no index.json)", ErrorKind::Usage);
  std::vector<LayoutEntry> out;
  try {
    json j = json::parse(read_file(index));
    for (const auto& m : j.at("manifests")) {
      if (m.contains("artifactType")) continue;  // refers to an image (image/layout.hpp); pushed with it
      std::string ref = m.value("annotations", json::object()).value("org.opencontainers.image.ref.name", "");
      out.push_back({ref, m.value("mediaType", kMediaTypeManifest), Digest::parse(m.at("digest").get<std::string>())});
    }
  } catch (const json::exception& e) {
    throw Error(index.string() + ": " + e.what());
  }
  return out;
}

static std::string checked_blob(const fs::path& dir, const Digest& d) {
  fs::path p = dir / "blobs" / "sha256" / d.hex();
  std::string bytes = read_file(p);
  if (Digest::of_bytes(bytes) != d) throw Error(p.string() + " does not hash to its name");
  return bytes;
}

ManifestRef manifest_from_layout(const fs::path& dir, const std::string& media_type, const Digest& digest) {
  std::string bytes = checked_blob(dir, digest);
  ManifestRef m{media_type, bytes, digest, {}, {}, "", "", ""};
  try {
    json j = json::parse(bytes);
    if (j.contains("mediaType") && j["mediaType"].is_string()) m.media_type = j["mediaType"].get<std::string>();
    if (is_index(m.media_type) || (j.contains("manifests") && !j.contains("layers"))) {
      for (const auto& c : j.at("manifests"))
        m.children.push_back(manifest_from_layout(dir, c.value("mediaType", kMediaTypeManifest),
                                                  Digest::parse(c.at("digest").get<std::string>())));
      return m;
    }
    std::vector<json> descs{j.at("config")};
    for (const auto& l : j.at("layers")) descs.push_back(l);
    for (const auto& d : descs) {
      Digest bd = Digest::parse(d.at("digest").get<std::string>());
      fs::path p = dir / "blobs" / "sha256" / bd.hex();
      if (!fs::exists(p)) throw Error(dir.string() + " lacks blob " + bd.str() + " of manifest " + digest.str());
      m.blobs.push_back({bd, d.at("size").get<uint64_t>(), d.value("mediaType", ""), p, {}});
    }
    const Digest& cd = m.blobs.front().digest;
    ImageConfig cfg =
        read_image_config(checked_blob(dir, cd),
                          dir.string() + ": config " + cd.str() + " of manifest " + digest.str());
    m.os = cfg.os, m.architecture = cfg.architecture, m.variant = cfg.variant;
  } catch (const json::exception& e) {
    throw Error(dir.string() + ": manifest " + digest.str() + ": " + e.what());
  }
  return m;
}

ManifestRef make_index(const std::vector<ManifestRef>& manifests) {
  std::vector<Descriptor> ds;
  for (const auto& m : manifests) {
    Descriptor d{m.media_type, m.digest, m.bytes.size(), {}, std::nullopt};
    if (!m.os.empty()) d.platform = std::make_pair(m.os, m.architecture);
    ds.push_back(d);
  }
  std::string bytes = make_index_json(ds);
  return ManifestRef{kMediaTypeIndex, bytes, Digest::of_bytes(bytes), {}, manifests, "", "", ""};
}

static Digest record_key(const std::string& registry, const Digest& blob) {
  return KeyHasher().field("registry", registry).field("blob", blob.str()).finish();
}

std::vector<std::string> known_repositories(const Store& store, const std::string& registry, const Digest& blob) {
  std::vector<std::string> out;
  if (auto rec = store.get_record("registry-blob", record_key(registry, blob))) {
    try {
      out = json::parse(*rec).get<std::vector<std::string>>();
    } catch (const json::exception&) {
    }
  }
  return out;
}

void remember_repository(const Store& store, const std::string& registry, const Digest& blob,
                         const std::string& repository) {
  auto repos = known_repositories(store, registry, blob);
  if (std::find(repos.begin(), repos.end(), repository) != repos.end()) return;
  repos.insert(repos.begin(), repository);
  if (repos.size() > 8) repos.resize(8);
  store.put_record("registry-blob", record_key(registry, blob), json(repos).dump());
}

namespace {

void collect(const ManifestRef& m, std::map<Digest, const BlobRef*>& blobs) {
  for (const auto& b : m.blobs) blobs.emplace(b.digest, &b);
  for (const auto& c : m.children) collect(c, blobs);
}

std::string short_digest(const Digest& d) { return d.str().substr(0, 19); }

}  // namespace

// Whether a manifest PUT was refused the way a registry refuses one while
// another client writes the same documents (see put_manifest).
static bool concurrent_write_race(const http::Response& r) {
  if (r.status != 400 && r.status != 404) return false;
  try {
    auto j = nlohmann::json::parse(r.body);
    for (const auto& e : j.at("errors")) {
      std::string code = e.value("code", "");
      if (code == "DIGEST_INVALID" || code == "MANIFEST_BLOB_UNKNOWN") return true;
    }
  } catch (const nlohmann::json::exception&) {
  }
  return false;
}

// Children first, so the registry knows every manifest an index names.
static void put_manifest(Session& s, http::Client& c, const std::string& repo, const ManifestRef& m,
                         const std::string& tag, PushReport& report) {
  for (const auto& child : m.children) put_manifest(s, c, repo, child, "", report);
  std::string ref = tag.empty() ? m.digest.str() : tag;
  http::Request req{.method = "PUT", .url = s.url("/v2/" + repo + "/manifests/" + ref), .body = m.bytes};
  req.headers.push_back("Content-Type: " + m.media_type);
  auto r = s.send(c, req);
  // Another client putting the same manifest or one it names at the same moment
  // (the machines of a fan-out do): distribution's filesystem storage rewrites a
  // manifest's bytes in place, so a concurrent reader may see them half written
  // and answer DIGEST_INVALID or MANIFEST_BLOB_UNKNOWN. The PUT is idempotent:
  // tried again after a backoff, it succeeds once the other write is done.
  const http::RetryPolicy& policy = s.retry_policy();
  double wait = std::min(policy.base_seconds, 0.25);
  for (int attempt = 1; attempt < policy.attempts && concurrent_write_race(r); ++attempt, wait *= 2) {
    s.note_retry("putting manifest " + m.digest.str() + ": " + describe_error(r) +
                 " (another client may be writing it at the same moment)");
    if (policy.sleep)
      policy.sleep(wait);
    else
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    r = s.send(c, req);
  }
  if (r.status != 201 && r.status != 200) s.fail(r, "putting manifest " + m.digest.str() + (tag.empty() ? "" : " as " + tag));
  std::string got = r.header("docker-content-digest");
  if (!got.empty() && got != m.digest.str())
    throw Error(s.op() + ": the registry stored manifest " + m.digest.str() + " as " + got +
                " (it changed the bytes it was sent)");
  if (!tag.empty()) report.pushed.emplace_back(s.registry() + "/" + repo + ":" + tag, m.digest);
}

PushReport push_images(const Reference& target, const std::vector<TaggedManifest>& images, const PushOptions& o,
                       Status& status) {
  std::string op = "push to " + target.name();
  Session session(target.registry, op, push_session_options(target, o.session, op), status, target.repository);
  const std::string& repo = target.repository;
  std::map<Digest, const BlobRef*> unique;
  for (const auto& i : images) collect(i.manifest, unique);
  std::vector<const BlobRef*> blobs;
  std::map<Digest, std::vector<std::string>> sources;
  session.add_scope(repo, "pull,push");
  for (const auto& [d, b] : unique) {
    blobs.push_back(b);
    if (!o.store) continue;
    for (const auto& from : known_repositories(*o.store, target.registry, d)) {
      if (from == repo) continue;
      sources[d].push_back(from);
      session.add_scope(from, "pull");
    }
  }
  std::sort(blobs.begin(), blobs.end(), [](auto* a, auto* b) { return a->size > b->size; });

  PushReport report;
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  auto worker = [&] {
    try {
      auto client = session.make_client();
      for (size_t i; !stop && (i = next++) < blobs.size();) {
        const BlobRef& b = *blobs[i];
        int task = status.task_begin("blob " + short_digest(b.digest) + " " + human_bytes(static_cast<double>(b.size)), b.size);
        auto start = std::chrono::steady_clock::now();
        UploadStats st;
        auto src = sources.find(b.digest);
        BlobOutcome out;
        try {
          out = upload_blob(session, *client, repo, b, src == sources.end() ? std::vector<std::string>{} : src->second, o,
                            task, st);
        } catch (...) {
          status.task_end(task, "failed");  // no progress bar left behind
          throw;
        }
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::string what = out == BlobOutcome::Present ? "already in " + repo
                           : out == BlobOutcome::Mounted ? "mounted from another repository"
                                                          : "sent " + human_bytes(static_cast<double>(b.size)) + " at " +
                                                                human_bytes(b.size / std::max(secs, 1e-3)) + "/s";
        if (st.resumes) what += ", resumed " + std::to_string(st.resumes) + "x";
        if (st.restarts) what += ", restarted " + std::to_string(st.restarts) + "x";
        status.task_end(task, what);
        if (o.store) remember_repository(*o.store, target.registry, b.digest, repo);
        std::lock_guard lk(mu);
        report.bytes_sent += st.bytes_sent;
        report.resumes += st.resumes, report.restarts += st.restarts;
        (out == BlobOutcome::Present ? report.blobs_present
         : out == BlobOutcome::Mounted ? report.blobs_mounted : report.blobs_sent)++;
      }
    } catch (...) {
      std::lock_guard lk(mu);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  try {
    session.url("/v2/");  // find the endpoint and authenticate once, before the workers start
    int n = usable_connections(std::max(1, std::min<int>(o.jobs, static_cast<int>(blobs.size()))));
    if (n < std::min<int>(o.jobs, static_cast<int>(blobs.size())))
      status.message(Level::Info, "sending " + std::to_string(n) + " blobs at once, not " + std::to_string(o.jobs) +
                                      ": the limit on open files (ulimit -n) allows no more");
    run_on_threads(static_cast<size_t>(n), worker);
    if (error) std::rethrow_exception(error);
    auto client = session.make_client();
    for (const auto& i : images) put_manifest(session, *client, repo, i.manifest, i.tag, report);
  } catch (const http::HttpError& e) {
    throw Error(session.op() + ": " + e.what());
  }
  return report;
}

void report_push(const PushReport& r, double seconds, Status& status) {
  status.message(Level::Info, "blobs: " + std::to_string(r.blobs_sent) + " sent (" +
                                  human_bytes(static_cast<double>(r.bytes_sent)) + "), " +
                                  std::to_string(r.blobs_present) + " already there, " +
                                  std::to_string(r.blobs_mounted) + " mounted; " + std::to_string(r.resumes) +
                                  " resumed, " + std::to_string(r.restarts) + " restarted; " +
                                  std::to_string(seconds).substr(0, 5) + " s");
  for (const auto& [ref, digest] : r.pushed) status.result(ref, digest.str());
}

}  // namespace sb::registry

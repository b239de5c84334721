#include "registry/referrers.hpp"

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "image/layout.hpp"

namespace sb::registry {

using json = nlohmann::json;

std::string artifact_manifest(const std::string& artifact_type, const BlobRef& file, const Subject& subject,
                              const std::map<std::string, std::string>& annotations) {
  return artifact_manifest_json(artifact_type, {file.media_type, file.digest, file.size, {}, {}},
                                {subject.media_type, subject.digest, subject.size, {}, {}}, annotations);
}

std::string referrers_tag(const Digest& subject) { return "sha256-" + subject.hex(); }

std::string add_referrer(const std::string& index, const std::string& manifest) {
  json idx = index.empty() ? json{{"schemaVersion", 2}, {"mediaType", kMediaTypeIndex}, {"manifests", json::array()}}
                           : json::parse(index);
  json m = json::parse(manifest);
  json d{{"mediaType", m.value("mediaType", kMediaTypeManifest)},
         {"digest", Digest::of_bytes(manifest).str()},
         {"size", manifest.size()}};
  if (m.contains("artifactType")) d["artifactType"] = m["artifactType"];
  if (m.contains("annotations")) d["annotations"] = m["annotations"];
  json list = json::array();
  for (const auto& e : idx.value("manifests", json::array()))
    if (e.value("digest", "") != d["digest"]) list.push_back(e);
  list.push_back(d);
  idx["manifests"] = list;
  return idx.dump();
}

AttachResult attach_artifact(const Reference& target, const Subject& subject, const std::string& artifact_type,
                             const std::string& bytes, const std::map<std::string, std::string>& annotations,
                             const PushOptions& o, Status& status) {
  std::string op = "attach to " + target.name();
  Session session(target.registry, op, push_session_options(target, o.session, op), status, target.repository);
  const std::string& repo = target.repository;
  session.add_scope(repo, "pull,push");
  BlobRef file{Digest::of_bytes(bytes), bytes.size(), artifact_type, {}, bytes};
  BlobRef empty{Digest::of_bytes("{}"), 2, kMediaTypeEmpty, {}, "{}"};
  std::string manifest = artifact_manifest(artifact_type, file, subject, annotations);
  AttachResult result{Digest::of_bytes(manifest), ""};
  try {
    auto client = session.make_client();
    for (const auto* b : {&empty, &file}) {
      UploadStats st;
      int task = status.task_begin("blob " + b->digest.str().substr(0, 19), b->size);
      upload_blob(session, *client, repo, *b, {}, o, task, st);
      status.task_end(task, "");
    }
    http::Request put{.method = "PUT", .url = session.url("/v2/" + repo + "/manifests/" + result.artifact.str()),
                      .body = manifest};
    put.headers.push_back(std::string("Content-Type: ") + kMediaTypeManifest);
    auto r = session.send(*client, put);
    if (r.status != 201 && r.status != 200) session.fail(r, "putting the artifact manifest " + result.artifact.str());
    if (r.header("oci-subject") == subject.digest.str()) {
      result.how = "the referrers API";
      return result;
    }
    // No referrers API: the referrers tag, read, extended, written back.
    std::string tag = referrers_tag(subject.digest);
    http::Request get{.method = "GET", .url = session.url("/v2/" + repo + "/manifests/" + tag),
                      .max_body = limits::registry_document()};
    get.headers.push_back(std::string("Accept: ") + kMediaTypeIndex);
    auto g = session.send(*client, get);
    std::string index;
    if (g.status == 200)
      index = g.body;
    else if (g.status != 404)
      session.fail(g, "reading the referrers tag " + tag);
    std::string updated = add_referrer(index, manifest);
    http::Request put_index{.method = "PUT", .url = session.url("/v2/" + repo + "/manifests/" + tag), .body = updated};
    put_index.headers.push_back(std::string("Content-Type: ") + kMediaTypeIndex);
    auto pi = session.send(*client, put_index);
    if (pi.status != 201 && pi.status != 200) session.fail(pi, "putting the referrers tag " + tag);
    result.how = "the referrers tag " + tag;
  } catch (const http::HttpError& e) {
    throw Error(session.op() + ": " + e.what());
  } catch (const json::exception& e) {
    throw Error(session.op() + ": the referrers index is malformed: " + e.what());
  }
  return result;
}

std::vector<json> list_referrers(Session& session, http::Client& client, const std::string& repo,
                                 const Digest& subject) {
  auto descriptors = [&](const std::string& body, const std::string& what) {
    std::vector<json> out;
    try {
      json idx = json::parse(body);
      for (const auto& m : idx.value("manifests", json::array()))
        if (m.is_object() && m.contains("digest")) out.push_back(m);
    } catch (const json::exception& e) {
      throw Error(session.op() + ": " + what + " is not an index: " + e.what());
    }
    return out;
  };
  http::Request api{.url = session.url("/v2/" + repo + "/referrers/" + subject.str()),
                    .max_body = limits::registry_document()};
  api.headers.push_back(std::string("Accept: ") + kMediaTypeIndex);
  auto r = session.send(client, api);
  if (r.status == 200) return descriptors(r.body, "the referrers of " + subject.str());
  // No referrers API: 404 as the distribution spec says, or what some
  // registries answer for a route they do not know.
  if (r.status != 404 && r.status != 405 && r.status != 501)
    session.fail(r, "listing the referrers of " + subject.str());
  std::string tag = referrers_tag(subject);
  http::Request get{.url = session.url("/v2/" + repo + "/manifests/" + tag), .max_body = limits::registry_document()};
  get.headers.push_back(std::string("Accept: ") + kMediaTypeIndex);
  auto g = session.send(client, get);
  if (g.status == 404) return {};
  if (g.status != 200) session.fail(g, "reading the referrers tag " + tag);
  return descriptors(g.body, "the referrers tag " + tag);
}

}  // namespace sb::registry

#include "registry/sign.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "image/image.hpp"
#include "registry/auth.hpp"
#include "registry/pull.hpp"
#include "registry/session.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/limits.hpp"

namespace sb::registry {

using json = nlohmann::json;

namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// A key from a PEM file: the private one (`priv`) or the public one.
Pkey read_key(const std::filesystem::path& file, bool priv) {
  const std::string text = read_file(file);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), BIO_free);
  EVP_PKEY* k = priv ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                     : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (!k)
    throw Error(file.string() + ": not a PEM " + (priv ? "private key (an unencrypted one, as 'openssl genpkey' writes)"
                                                       : "public key (as 'openssl pkey -pubout' writes)"),
                ErrorKind::Input);
  return Pkey(k);
}

// SHA-256 for EC and RSA keys (as sigstore signs), none for Ed25519 (which hashes itself).
const EVP_MD* digest_for(EVP_PKEY* k) { return EVP_PKEY_get_id(k) == EVP_PKEY_ED25519 ? nullptr : EVP_sha256(); }

// "REGISTRY/REPO" of a docker-reference ("REGISTRY/REPO:TAG", "...@sha256:...").
std::string repository_of(const std::string& reference) {
  std::string r = reference.substr(0, reference.find('@'));
  size_t slash = r.rfind('/'), colon = r.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) r.resize(colon);
  return r;
}

// A session for `op` on ref's repository, asking for `actions` there.
std::unique_ptr<Session> open_session(const Reference& ref, const std::string& op, const SessionOptions& options,
                                      Status& status, const char* actions) {
  auto s = std::make_unique<Session>(ref.registry, op, options, status, ref.repository);
  s->add_scope(ref.repository, actions);
  return s;
}

Digest manifest_digest(Session& s, http::Client& c, const Reference& ref) {
  if (ref.digest) return *ref.digest;
  auto m = fetch_manifest(s, c, ref.repository, ref.selector(), std::nullopt);
  return m->digest;
}

}  // namespace

std::string sigstore_payload(const std::string& docker_reference, const Digest& manifest) {
  json j = {{"critical",
             {{"identity", {{"docker-reference", docker_reference}}},
              {"image", {{"docker-manifest-digest", manifest.str()}}},
              {"type", "cosign container image signature"}}},
            {"optional", nullptr}};
  return j.dump();
}

std::string sign_payload(const std::string& payload, const std::filesystem::path& key_pem) {
  Pkey key = read_key(key_pem, true);
  MdCtx ctx(EVP_MD_CTX_new());
  size_t len = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(payload.data());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, digest_for(key.get()), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, data, payload.size()) != 1)
    throw Error(key_pem.string() + ": this key cannot sign (an EC, Ed25519 or RSA key is wanted)", ErrorKind::Input);
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data, payload.size()) != 1)
    throw Error(key_pem.string() + ": signing failed");
  sig.resize(len);
  return base64_encode(sig);
}

bool payload_verifies(const std::string& payload, const std::string& signature,
                      const std::filesystem::path& public_pem) {
  Pkey key = read_key(public_pem, false);
  std::string sig;
  try {
    sig = base64_decode(signature);
  } catch (const Error&) {
    return false;
  }
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, digest_for(key.get()), nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) == 1;
}

std::string signature_tag(const Digest& manifest) { return "sha256-" + manifest.hex() + ".sig"; }

SignResult sign_image(const Reference& ref, const std::filesystem::path& key_pem, const PushOptions& o,
                      Status& status) {
  const std::string op = "sign " + ref.str();
  auto owned = open_session(ref, op, push_session_options(ref, o.session, op), status, "pull,push");
  Session& session = *owned;
  const std::string& repo = ref.repository;
  SignResult out;
  try {
    auto client = session.make_client();
    out.manifest = manifest_digest(session, *client, ref);
    out.identity = ref.name() + (ref.tag.empty() ? "" : ":" + ref.tag);
    out.tag = signature_tag(out.manifest);
    const std::string payload = sigstore_payload(out.identity, out.manifest);
    const std::string signature = sign_payload(payload, key_pem);
    // The signatures already there stay; this one is added (once).
    json layers = json::array();
    if (auto old = fetch_manifest(session, *client, repo, out.tag, std::nullopt, true))
      layers = json::parse(old->bytes).value("layers", json::array());
    BlobRef blob{Digest::of_bytes(payload), payload.size(), kSimpleSigningType, {}, payload};
    json layer = {{"mediaType", kSimpleSigningType},
                  {"size", payload.size()},
                  {"digest", blob.digest.str()},
                  {"annotations", {{kCosignSignatureAnnotation, signature}}}};
    bool have = false;
    for (const auto& l : layers) have = have || l == layer;
    if (!have) layers.push_back(layer);
    json diff_ids = json::array();
    for (const auto& l : layers) diff_ids.push_back(l.value("digest", ""));
    const std::string config =
        json{{"architecture", ""},
             {"config", json::object()},
             {"created", "0001-01-01T00:00:00Z"},
             {"os", ""},
             {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}}
            .dump();
    BlobRef config_blob{Digest::of_bytes(config), config.size(), kMediaTypeConfig, {}, config};
    for (const auto* b : {&blob, &config_blob}) {
      UploadStats st;
      int task = status.task_begin("blob " + b->digest.str().substr(0, 19), b->size);
      upload_blob(session, *client, repo, *b, {}, o, task, st);
      status.task_end(task, "");
    }
    const std::string manifest =
        json{{"schemaVersion", 2},
             {"mediaType", kMediaTypeManifest},
             {"config", {{"mediaType", kMediaTypeConfig}, {"size", config.size()}, {"digest", config_blob.digest.str()}}},
             {"layers", layers}}
            .dump();
    http::Request put{.method = "PUT", .url = session.url("/v2/" + repo + "/manifests/" + out.tag), .body = manifest};
    put.headers.push_back(std::string("Content-Type: ") + kMediaTypeManifest);
    auto r = session.send(*client, put);
    if (r.status != 201 && r.status != 200) session.fail(r, "putting the signature " + out.tag);
  } catch (const http::HttpError& e) {
    throw Error(session.op() + ": " + e.what());
  } catch (const json::exception& e) {
    throw Error(session.op() + ": the signature manifest " + out.tag + " is malformed: " + e.what());
  }
  return out;
}

VerifyResult verify_image(const Reference& ref, const std::filesystem::path& public_pem,
                          const SessionOptions& options, Status& status) {
  (void)read_key(public_pem, false);  // a bad key file is said before any request
  const std::string op = "verify " + ref.str();
  auto owned = open_session(ref, op, options, status, "pull");
  Session& session = *owned;
  const std::string& repo = ref.repository;
  VerifyResult out;
  try {
    auto client = session.make_client();
    out.manifest = manifest_digest(session, *client, ref);
    auto sigs = fetch_manifest(session, *client, repo, signature_tag(out.manifest), std::nullopt, true);
    if (!sigs)
      throw Error(op + ": " + out.manifest.str() + " has no signature (no " + signature_tag(out.manifest) + " in " +
                      ref.name() + ")",
                  ErrorKind::Input);
    for (const auto& l : json::parse(sigs->bytes).value("layers", json::array())) {
      if (l.value("mediaType", "") != kSimpleSigningType) continue;
      ++out.signatures;
      const std::string digest = l.value("digest", "");
      http::Request get{.method = "GET", .url = session.url("/v2/" + repo + "/blobs/" + digest),
                        .max_body = limits::registry_document()};
      auto r = session.send(*client, get);
      if (r.status != 200) session.fail(r, "reading the signature payload " + digest);
      if (Digest::of_bytes(r.body).str() != digest) {
        out.why.push_back(digest + ": the registry's bytes are not this digest");
        continue;
      }
      const std::string signature =
          l.contains("annotations") ? l["annotations"].value(kCosignSignatureAnnotation, "") : "";
      if (!payload_verifies(r.body, signature, public_pem)) {
        out.why.push_back(digest + ": not signed by " + public_pem.string());
        continue;
      }
      json p = json::parse(r.body, nullptr, false);
      const json none = json::object();
      const json& critical = p.is_object() && p.contains("critical") ? p["critical"] : none;
      std::string signed_digest, identity;
      if (critical.contains("image")) signed_digest = critical["image"].value("docker-manifest-digest", "");
      if (critical.contains("identity")) identity = critical["identity"].value("docker-reference", "");
      if (signed_digest != out.manifest.str()) {
        out.why.push_back(digest + ": signs " + (signed_digest.empty() ? "no image" : signed_digest) + ", not " +
                          out.manifest.str());
        continue;
      }
      if (repository_of(identity) != ref.name()) {
        out.why.push_back(digest + ": signs the image as " + identity + ", not as one of " + ref.name());
        continue;
      }
      out.identity = identity;
      return out;
    }
  } catch (const http::HttpError& e) {
    throw Error(session.op() + ": " + e.what());
  } catch (const json::exception& e) {
    throw Error(session.op() + ": the signature manifest is malformed: " + e.what());
  }
  std::string msg = op + ": no signature of " + out.manifest.str() + " verifies with " + public_pem.string() + " (" +
                    std::to_string(out.signatures) + " found)";
  for (const auto& w : out.why) msg += "\n  " + w;
  throw Error(msg, ErrorKind::Input);
}

}  // namespace sb::registry

// Image signatures in the sigstore (cosign) format, which skopeo and podman
// verify through a policy.json entry of type `sigstoreSigned`: a signature is
// a "simple signing" payload naming the image (its reference and manifest
// digest), signed with an ECDSA or Ed25519 key (PEM, as `openssl genpkey`
// makes it), pushed as a layer of the manifest tagged `sha256-<hex>.sig` in
// the image's repository, with the base64 signature in the layer's
// `dev.cosignproject.cosign/signature` annotation. Several signatures of one
// image are several layers of that manifest.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "registry/push.hpp"
#include "registry/reference.hpp"
#include "util/digest.hpp"
#include "util/status.hpp"

namespace sb::registry {

constexpr const char* kSimpleSigningType = "application/vnd.dev.cosign.simplesigning.v1+json";
constexpr const char* kCosignSignatureAnnotation = "dev.cosignproject.cosign/signature";

// The payload that names `manifest` as the image `docker_reference`
// (REGISTRY/REPO or REGISTRY/REPO:TAG); canonical bytes.
std::string sigstore_payload(const std::string& docker_reference, const Digest& manifest);

// The base64 signature of `payload` with the private key in `key_pem` (a PEM
// file: EC P-256/P-384 signs SHA-256/384, Ed25519 the bytes). Throws sb::Error
// naming the file when it is no private key.
std::string sign_payload(const std::string& payload, const std::filesystem::path& key_pem);

// Whether `signature` (base64) is `payload` signed by the key whose public
// half is in `public_pem`. Throws sb::Error naming the file when it is no key.
bool payload_verifies(const std::string& payload, const std::string& signature,
                      const std::filesystem::path& public_pem);

// The tag of an image's signatures: "sha256-<hex>.sig".
std::string signature_tag(const Digest& manifest);

struct SignResult {
  Digest manifest = Digest::of_bytes("");  // what was signed: the image's (or index's) manifest digest
  std::string identity;  // the docker-reference the payload names
  std::string tag;       // where the signature is: sha256-<hex>.sig
};

// Signs the image `ref` names (its tag resolved to a digest first) with
// `key_pem` and pushes the signature beside it, keeping the signatures
// already there.
SignResult sign_image(const Reference& ref, const std::filesystem::path& key_pem, const PushOptions& options,
                      Status& status);

struct VerifyResult {
  Digest manifest = Digest::of_bytes("");
  int signatures = 0;            // signature layers found
  std::string identity;          // the verified payload's docker-reference
  std::vector<std::string> why;  // for each layer that did not verify: why
};

// Verifies the image `ref` names against `public_pem`: some signature in its
// `sha256-<hex>.sig` manifest must be by that key, over a payload that names
// this manifest digest and this repository. Throws sb::Error (ErrorKind::Input)
// saying why when none does.
VerifyResult verify_image(const Reference& ref, const std::filesystem::path& public_pem, const SessionOptions& options,
                          Status& status);

}  // namespace sb::registry

// stackbuild sign / verify: sigstore (cosign-format) signatures of images in
// a registry (registry/sign.hpp).
#include <cstdio>

#include "cli/cli.hpp"
#include "cli/exit_codes.hpp"
#include "registry/push.hpp"
#include "registry/session.hpp"
#include "registry/sign.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kSignHelp =
    "usage: stackbuild sign REGISTRY/REPO[:TAG|@DIGEST] --key KEY.pem [options]\n"
    "\n"
    "Signs the image (or index) the reference names, in the sigstore format that cosign,\n"
    "skopeo and podman verify: a payload naming the reference and the manifest digest,\n"
    "signed with KEY.pem, pushed beside the image as a layer of the manifest tagged\n"
    "sha256-<hex>.sig (signatures already there stay). A tag is resolved to its digest\n"
    "first; the payload names REGISTRY/REPO:TAG (or REGISTRY/REPO for a digest), which is\n"
    "what skopeo's default signedIdentity matches.\n"
    "\n"
    "  KEY.pem   an unencrypted private key: EC P-256 (openssl genpkey -algorithm EC\n"
    "            -pkeyopt ec_paramgen_curve:P-256 -out key.pem), Ed25519 or RSA; its public\n"
    "            half (openssl pkey -in key.pem -pubout -out key.pub) is what verifiers use\n"
    "\n"
    "options:\n"
    "  --key FILE             the private key (required)\n"
    "  --creds USER:PASSWORD, --ca-cert FILE, --insecure-registry HOST[:PORT]  as for push\n";

const char* const kVerifyHelp =
    "usage: stackbuild verify REGISTRY/REPO[:TAG|@DIGEST] --key KEY.pub [options]\n"
    "\n"
    "Checks that the image the reference names is signed by the key: some signature in its\n"
    "sha256-<hex>.sig manifest must verify with KEY.pub over a payload that names this\n"
    "manifest digest and this repository. Exit 0 when one does (printing the signed\n"
    "identity); else exit 3, saying for each signature why it does not.\n"
    "\n"
    "options:\n"
    "  --key FILE             the public key (PEM)\n"
    "  --creds USER:PASSWORD, --ca-cert FILE, --insecure-registry HOST[:PORT]  as for pull\n";

namespace {

registry::Reference image_argument(const Args& args, const char* command) {
  if (args.positional().size() != 1)
    throw Error(std::string(command) + " wants one REGISTRY/REPO[:TAG|@DIGEST]", ErrorKind::Usage);
  auto key = args.get("--key");
  if (!key) throw Error(std::string(command) + " wants --key FILE", ErrorKind::Usage);
  if (!fs::is_regular_file(*key)) throw Error("--key " + *key + ": no such file", ErrorKind::Usage);
  return registry::Reference::parse(args.positional()[0]);
}

}  // namespace

namespace {

// sign and verify: one reference, --key FILE, registry access as for push.
int sign_or_verify(const std::vector<std::string>& argv, bool sign) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--key", "--creds", "--ca-cert"});
  Args args(argv, kCommonFlags, options, {"--insecure-registry"});
  if (maybe_help(args, sign ? kSignHelp : kVerifyHelp)) return kExitOk;
  auto ref = image_argument(args, sign ? "sign" : "verify");
  const std::string key = *args.get("--key");
  Context ctx = make_context(args);
  if (sign) {
    auto done = registry::sign_image(ref, key, push_options(args), *ctx.status);
    ctx.status->result("signed " + done.identity, done.manifest.str() + " (" + ref.name() + ":" + done.tag + ")");
  } else {
    auto done = registry::verify_image(ref, key, registry_session_options(args), *ctx.status);
    ctx.status->result("verified " + done.identity, done.manifest.str() + " (signed by " + key + ")");
  }
  return kExitOk;
}

}  // namespace

int cmd_sign(const std::vector<std::string>& argv) { return sign_or_verify(argv, true); }
int cmd_verify(const std::vector<std::string>& argv) { return sign_or_verify(argv, false); }

}  // namespace sb::cli

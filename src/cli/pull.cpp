#include <set>

#include "cli/cli.hpp"
#include "image/layout.hpp"
#include "registry/pull.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kPullHelp =
    "usage: stackbuild pull REGISTRY/REPO[:TAG|@DIGEST] LAYOUT[:REF] [options]\n"
    "       stackbuild pull REGISTRY/REPO[:TAG|@DIGEST] --dry-run\n"
    "\n"
    "Pulls an image into the store and writes it into the OCI layout LAYOUT under the ref\n"
    "name REF (default: TAG, else latest). Reads OCI and Docker v2 manifests and indexes\n"
    "(manifest lists); from an index it takes the image for --platform (an index of several\n"
    "images of one platform, as a build's matrix index, is refused, naming them). Every\n"
    "blob's digest is checked before it enters the store; a manifest named by digest must\n"
    "hash to it.\n"
    "The machine's registries.conf (its mirrors, remapped locations, insecure and blocked\n"
    "registries), certs.d and policy.json (names it rejects; signatures are not verified, so\n"
    "names it wants signed are refused) are read as skopeo reads them (docs/registry.md).\n"
    "\n"
    "options:\n"
    "  --platform OS/ARCH[/VARIANT]  the image to take from an index (default linux/amd64)\n"
    "  --all                     every image of an index (a build's matrix index: each point),\n"
    "                            each under the tags the build recorded for it (else REF and\n"
    "                            its platform), and the index itself under REF\n"
    "  --creds USER:PASSWORD     credentials (default: $STACKBUILD_REGISTRY_USER and\n"
    "                            $STACKBUILD_REGISTRY_PASSWORD, else the auth files of skopeo\n"
    "                            login and docker login, and their credential helpers)\n"
    "  --ca-cert FILE            trust this CA (PEM) besides the system store and certs.d\n"
    "  --insecure-registry HOST[:PORT]  allow plain HTTP and unverified TLS for HOST (repeatable)\n"
    "  -j, --jobs N              blobs fetched at once (default 3, at most 256)\n"
    "  --insecure-policy         pull whatever policy.json says (as skopeo's --insecure-policy)\n"
    "  --dry-run                 fetch nothing (LAYOUT may be left out): print where the pull\n"
    "                            would go, in order (mirrors, the location), with the TLS\n"
    "                            files, the source of the credentials (never the secret) and\n"
    "                            the policy.json scope for each; a refused name fails as a pull would\n"
    "Also takes the options of every command (stackbuild --help).\n";

// pull --all: every image `ref` names (registry::list_images), each pulled by
// digest and written under its ref names: the tags a build recorded in its
// matrix index (dev.stackbuild.tags), else `name` and its platform; the
// index itself under `name` when every entry of it was pulled.
static int pull_all(const registry::Reference& ref, const fs::path& layout, const std::string& name,
                    const registry::PullOptions& o, Context& ctx) {
  Store store = ctx.store();
  auto listing = registry::list_images(ref, store, o.session, *ctx.status, {});
  if (listing.images.empty())
    throw Error(ref.str() + " names no image (" + listing.top.media_type + ")", ErrorKind::Usage);
  std::vector<TaggedImage> images;
  std::set<std::string> used;  // ref names given so far
  uint64_t fetched = 0;
  std::set<std::string> pulled;  // digests: an image the index lists twice is pulled once
  for (const auto& li : listing.images) {
    if (!pulled.insert(li.manifest.digest.str()).second) continue;
    registry::Reference by_digest = ref;
    by_digest.tag.clear();
    by_digest.digest = li.manifest.digest;
    auto r = registry::pull_image(by_digest, store, o, *ctx.status);
    fetched += r.bytes_fetched;
    auto tags = li.annotations.find("dev.stackbuild.tags");
    std::vector<std::string> refs =
        tags == li.annotations.end() ? std::vector<std::string>{} : recorded_ref_names(tags->second);
    if (refs.empty()) {
      std::string platform;
      for (const char* k : {"os", "architecture", "variant"})
        if (auto it = li.platform.find(k); it != li.platform.end() && !it->second.empty())
          platform += "-" + it->second;
      std::string r = listing.images.size() == 1 ? name : name + platform;
      if (listing.images.size() > 1 && (platform.empty() || used.count(r)))  // no platform, or another image's
        r += "-" + li.manifest.digest.hex().substr(0, 12);
      refs.push_back(r);
    }
    for (const auto& r2 : refs) {
      validate_tag(r2);
      used.insert(r2);
      images.push_back(TaggedImage{"pulled:" + r2, r.image});
      ctx.status->result(ref.name() + "@" + li.manifest.digest.str(), layout.string() + ":" + r2);
    }
  }
  std::vector<TaggedIndex> indexes;
  bool index = listing.top.digest != listing.images.front().manifest.digest;
  if (index) {
    size_t entries = 0, missing = 0;
    for (const auto& e : nlohmann::json::parse(listing.top.bytes).value("manifests", nlohmann::json::array())) {
      ++entries;
      if (!pulled.count(e.value("digest", ""))) ++missing;
    }
    if (missing == 0) {
      validate_tag(name);
      indexes.push_back(TaggedIndex{name, listing.top.bytes, listing.top.digest});
      ctx.status->result(ref.str(), layout.string() + ":" + name + " (the index)");
    } else {
      ctx.status->message(Level::Warning, ref.str() + ": " + std::to_string(missing) + " of the index's " +
                                              std::to_string(entries) +
                                              " manifests are not images; the index is not kept in the layout");
    }
  }
  write_oci_layout(layout, store, images, indexes);
  ctx.status->message(Level::Info, "fetched " + human_bytes(static_cast<double>(fetched)) + " of blobs");
  return kExitOk;
}

// pull --dry-run: what the machine's settings make of a pull of `ref`.
static int dry_run(const registry::Reference& ref, const registry::SessionOptions& session) {
  auto targets = registry::pull_targets(ref, session);  // fails as a pull would: a refused name, a broken file
  const auto& machine = *session.machine;
  const auto& conf = machine.conf();
  std::string files;
  for (const auto& f : conf.files()) files += (files.empty() ? "" : ", ") + f;
  printf("registries.conf: %s\n", files.empty() ? "none" : files.c_str());
  if (!session.check_policy) {
    printf("policy.json: not checked (--insecure-policy)\n");
  } else if (const auto& policy = machine.policy()) {
    auto scope = policy->scope_for(ref);
    printf("policy.json: %s\n", (!scope ? "its default" : scope->empty() ? "its docker default \"\"" : "scope \"" + *scope + "\"").c_str());
  } else {
    printf("policy.json: none\n");
  }
  int n = 0;
  for (const auto& t : targets) {
    bool insecure = registry::listed(t.ref.registry, t.options.insecure);
    printf("%d. %s%s%s\n", ++n, t.ref.str().c_str(), t.mirror ? " (mirror)" : "", insecure ? " (insecure)" : "");
    registry::TlsFiles tls = machine.tls(t.ref.registry);
    std::string trust = tls.dir.empty() ? "the system store" : "certs.d " + tls.dir.string() + ": " +
                                                                   std::to_string(tls.ca_files.size()) + " CA file(s)" +
                                                                   (tls.client_cert.empty() ? "" : ", client certificate " +
                                                                                                       tls.client_cert.filename().string());
    if (!session.ca_file.empty()) trust += ", --ca-cert " + session.ca_file.string();
    printf("   TLS: %s\n", insecure ? "not verified" : trust.c_str());
    registry::CredentialOptions co = t.options.credentials;
    co.helpers = conf.credential_helpers;
    auto creds = registry::find_credentials(t.ref.registry, t.ref.repository, co);
    printf("   credentials: %s\n", creds ? ("from " + creds->source + (creds->identity_token.empty() ? "" : " (an identity token)")).c_str()
                                         : "none (anonymous)");
  }
  return kExitOk;
}

int cmd_pull(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--creds", "--ca-cert", "-j", "--jobs", "--platform"});
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--dry-run", "--insecure-policy", "--all"});
  Args args(argv, flags, options, {"--insecure-registry"});
  if (maybe_help(args, kPullHelp)) return kExitOk;
  if (args.has("--dry-run") && args.positional().size() == 1)
    return dry_run(registry::Reference::parse(args.positional()[0]), registry_session_options(args));
  if (args.positional().size() != 2) throw Error("pull wants REGISTRY/REPO[:TAG|@DIGEST] and LAYOUT[:REF]", ErrorKind::Usage);
  auto ref = registry::Reference::parse(args.positional()[0]);
  std::string dest = args.positional()[1];
  fs::path layout = dest;
  std::string name = ref.tag.empty() ? "latest" : ref.tag;
  if (auto colon = dest.rfind(':'); colon != std::string::npos && dest.find('/', colon) == std::string::npos) {
    layout = dest.substr(0, colon), name = dest.substr(colon + 1);
  }
  registry::PullOptions o;
  o.session = registry_session_options(args);
  if (auto p = args.get("--platform")) registry::parse_platform(*p, o);
  auto jobs = args.integer("-j", 1, 256);
  if (!jobs) jobs = args.integer("--jobs", 1, 256);
  if (jobs) o.jobs = static_cast<int>(*jobs);

  if (args.has("--dry-run")) return dry_run(ref, o.session);
  Context ctx = make_context(args);
  if (args.has("--all")) {
    if (args.get("--platform")) throw Error("--all takes every platform; it takes no --platform", ErrorKind::Usage);
    return pull_all(ref, layout, name, o, ctx);
  }
  Store store = ctx.store();
  auto r = registry::pull_image(ref, store, o, *ctx.status);
  validate_tag(name);
  write_oci_layout(layout, store, {TaggedImage{"pulled:" + name, r.image}});
  ctx.status->message(Level::Info, "fetched " + human_bytes(static_cast<double>(r.bytes_fetched)) + " of blobs");
  ctx.status->result(ref.str(), r.image.manifest.digest.str());
  ctx.status->result("output", layout.string() + ":" + name);
  return kExitOk;
}

}  // namespace sb::cli

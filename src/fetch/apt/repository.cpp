#include "fetch/apt/repository.hpp"

#include <algorithm>
#include <ctime>

#include "fetch/apt/control.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/limits.hpp"
#include "util/number.hpp"
#include "util/process.hpp"

namespace sb::apt {

ReleaseFile parse_release(const std::string& text) {
  auto paragraphs = parse_paragraphs(text);
  if (paragraphs.empty()) throw Error("an empty Release file");
  const Paragraph& p = paragraphs.front();
  ReleaseFile r;
  r.origin = p.get("Origin");
  r.label = p.get("Label");
  r.suite = p.get("Suite");
  r.codename = p.get("Codename");
  r.date = p.get("Date");
  r.valid_until = p.get("Valid-Until");
  r.acquire_by_hash = p.get("Acquire-By-Hash") == "yes";
  const std::string& sums = p.get("SHA256");
  size_t pos = 0;
  while (pos < sums.size()) {
    size_t end = sums.find('\n', pos);
    if (end == std::string::npos) end = sums.size();
    auto words = split_words(std::string_view(sums).substr(pos, end - pos));
    pos = end + 1;
    if (words.size() != 3) continue;
    auto bytes = parse_integer<uint64_t>(words[1]);
    if (!bytes) throw Error("the Release file's SHA256 entry for " + words[2] + " has a size that is not a number: '" + words[1] + "'");
    r.files[words[2]] = {words[0], *bytes};
  }
  if (r.files.empty()) throw Error("the Release file lists no SHA256 sums (only SHA256 is trusted)");
  return r;
}

std::string strip_clearsign(const std::string& text) {
  if (text.rfind("-----BEGIN PGP SIGNED MESSAGE-----", 0) != 0) return text;
  size_t body = text.find("\n\n");
  size_t sig = text.find("\n-----BEGIN PGP SIGNATURE-----");
  if (body == std::string::npos || sig == std::string::npos || sig < body) return text;
  std::string out = text.substr(body + 2, sig - body - 2 + 1);
  // Dash-escaped lines ("- -----...") lose their escape.
  for (size_t p = 0; (p = out.find("\n- ", p)) != std::string::npos;) out.erase(p + 1, 2);
  if (out.rfind("- ", 0) == 0) out.erase(0, 2);
  return out;
}

namespace {

// Runs gpgv on `files` (a clearsigned file, or a detached signature and its
// data) against `keyrings`; throws a clear error naming `url` unless the
// signature is good and made by a key of one of them ("refusing `refusing`").
// Returns the signing key's fingerprint (gpgv's VALIDSIG).
// `lenient`: a good signature by a key that has expired in the keyring, or
// one by a key in none of them, is returned as such instead of refused.
Signer run_gpgv(const std::vector<std::string>& files, const std::vector<fs::path>& given, const fs::path& output,
                const std::string& url, const std::string& refusing = "the repository", bool lenient = false) {
  std::error_code ec;
  std::vector<fs::path> keyrings;
  for (const auto& k : given)
    // gpgv reads a keyring named without a '/' inside GNUPGHOME (a fresh,
    // empty directory here), not the working directory: always give it a path.
    if (!k.empty()) keyrings.push_back(fs::absolute(k));
  std::string names;
  for (const auto& k : keyrings) names += (names.empty() ? "" : ", ") + k.string();
  if (keyrings.empty() || std::any_of(keyrings.begin(), keyrings.end(), [&](const fs::path& k) { return !fs::exists(k, ec); }))
    throw Error(url + ": no keyring to check its signature" + (names.empty() ? std::string() : " (" + names + " does not exist)") +
                "; give the repository's signed-by keyring, or mark it trusted");
  TempDir tmp;
  ProcessSpec spec;
  spec.argv = {"gpgv", "--quiet", "--status-fd", "1"};
  for (const auto& k : keyrings) spec.argv.insert(spec.argv.end(), {"--keyring", k.string()});
  if (!output.empty()) spec.argv.insert(spec.argv.end(), {"--output", output.string()});
  spec.argv.insert(spec.argv.end(), files.begin(), files.end());
  auto env = current_environment();
  spec.env = {{"PATH", env.count("PATH") ? env["PATH"] : "/usr/bin:/bin"}, {"LC_ALL", "C"},
              {"GNUPGHOME", tmp.path().string()}};
  spec.capture_stdout = true;
  spec.merge_stderr = true;
  ProcessResult r;
  try {
    r = run_process(spec);
  } catch (Error& e) {
    e.add_trace("while checking the signature of " + url + " (install gpgv)");
    throw;
  }
  // The word after a status keyword: VALIDSIG's fingerprint, NO_PUBKEY's key id.
  auto after = [&](const std::string& keyword) -> std::string {
    const size_t at = r.output.find("[GNUPG:] " + keyword + " ");
    if (at == std::string::npos) return "";
    const size_t from = at + 10 + keyword.size();
    return r.output.substr(from, r.output.find_first_of(" \n", from) - from);
  };
  const bool bad = r.output.find("[GNUPG:] BADSIG") != std::string::npos ||
                   r.output.find("[GNUPG:] NODATA") != std::string::npos;
  Signer signer;
  signer.fingerprint = after("VALIDSIG");
  bool good = r.exit_status == 0 && !signer.fingerprint.empty() &&
              r.output.find("[GNUPG:] GOODSIG") != std::string::npos;
  if (!good && lenient && !bad) {
    if (!signer.fingerprint.empty() && r.output.find("[GNUPG:] EXPKEYSIG") != std::string::npos) {
      signer.expired = good = true;
    } else if (signer.fingerprint.empty() && !(signer.key_id = after("NO_PUBKEY")).empty()) {
      good = true;
    }
  }
  if (!good) {
    std::string why = r.output.find("NODATA") != std::string::npos ? "it is not signed"
                      : r.output.find("BADSIG") != std::string::npos ? "the signature is BAD (the file was altered)"
                      : r.output.find("NO_PUBKEY") != std::string::npos
                          ? "it is signed by a key that is not in " + names
                      : r.output.find("EXPKEYSIG") != std::string::npos ? "it is signed by an expired key"
                                                                       : "gpgv refused it";
    std::string detail;
    for (size_t p = 0; p < r.output.size();) {
      size_t e = r.output.find('\n', p);
      if (e == std::string::npos) e = r.output.size();
      std::string line = r.output.substr(p, e - p);
      if (line.rfind("[GNUPG:]", 0) != 0 && !line.empty()) detail += "\n  gpgv: " + line;
      p = e + 1;
    }
    throw Error(url + ": refusing " + refusing + ": " + why + detail);
  }
  return signer;
}

}  // namespace

std::string verify_inrelease(const fs::path& file, const fs::path& keyring, const std::string& url) {
  TempDir tmp;
  fs::path out = tmp.path() / "signed";
  run_gpgv({file.string()}, {keyring}, out, url);
  return read_file(out);
}

Signer verify_signer(const fs::path& file, const std::vector<fs::path>& keyrings, const std::string& what) {
  return run_gpgv({file.string()}, keyrings, {}, what, "it", true);
}

std::string verify_detached(const fs::path& release, const fs::path& signature, const fs::path& keyring,
                            const std::string& url) {
  // gpgv reads the data file once; a copy of it is what gets returned, so
  // the text checked is the text used.
  TempDir tmp;
  fs::path data = tmp.path() / "Release";
  fs::copy_file(release, data);
  run_gpgv({signature.string(), data.string()}, {keyring}, {}, url);
  return read_file(data);
}

namespace {

time_t parse_date(const std::string& s) {
  struct tm tm {};
  if (!strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm)) return 0;
  return timegm(&tm);
}

// The best index of a component: xz, then gz, then uncompressed.
std::pair<std::string, IndexFile> choose_index(const ReleaseFile& rel, const std::string& comp,
                                               const std::string& arch, const std::string& url) {
  std::string base = comp + "/binary-" + arch + "/Packages";
  for (const char* suffix : {".xz", ".gz", ""}) {
    auto it = rel.files.find(base + suffix);
    if (it != rel.files.end()) return *it;
  }
  throw Error(url + " lists no " + base + "{.xz,.gz,} (is '" + comp + "' a component of this suite, and " + arch +
              " one of its architectures?)");
}

bool absent(const fetch::FetchError& e) { return e.status() == 404 || e.status() == 410; }

// The text of repository `r`'s Release when it has no InRelease: Release,
// checked against Release.gpg unless the repository is trusted.
std::string detached_release(LoadedRepository& lr, const LoadOptions& o, const Store& store,
                             fetch::Fetcher& fetcher) {
  const Repository& r = lr.repo;
  std::string base = r.uri + "/dists/" + r.suite + "/";
  fetch::FetchItem rel_item{base + "Release", std::nullopt, std::nullopt, "Release of " + r.suite};
  fetch::FetchItem sig_item{base + "Release.gpg", std::nullopt, std::nullopt, "Release.gpg of " + r.suite};
  rel_item.max_size = sig_item.max_size = limits::apt_release();  // nothing pins their size
  auto neither = [&](const fetch::FetchError& e) {
    return Error(base + ": the repository has neither InRelease nor Release (HTTP " + std::to_string(e.status()) +
                 "); is '" + r.suite + "' a suite of " + r.uri + "?");
  };
  lr.detached = true;
  if (r.trusted) {
    try {
      return store.read(fetcher.fetch_one(rel_item).digest);
    } catch (const fetch::FetchError& e) {
      if (absent(e)) throw neither(e);
      throw;
    }
  }
  lr.keyring = r.signed_by.empty() ? o.default_keyring : r.signed_by;
  if (r.signed_by.empty()) lr.keyring_as = o.default_keyring_as;
  // The signature is checked before either file enters the store: Release is
  // fetched from inside the check of Release.gpg and checked against it
  // before it is kept, so a bad pair leaves neither behind.
  std::optional<std::string> text;
  sig_item.check = [&](const fs::path& signature) {
    fetch::FetchItem checked = rel_item;
    checked.check = [&](const fs::path& release) {
      text = verify_detached(release, signature, lr.keyring, base + "Release");
    };
    fetcher.fetch_one(checked);
  };
  std::optional<fetch::Fetched> sig;
  try {
    sig = fetcher.fetch_one(sig_item);
  } catch (const fetch::FetchError& e) {
    if (!absent(e)) throw;
    if (e.url() == rel_item.url) throw neither(e);
    // No signature: is there a Release at all? (Looked at, never kept.)
    fetch::FetchItem peek = rel_item;
    peek.check = [&](const fs::path&) {
      throw Error(base + "Release: refusing the repository: it is not signed (there is no InRelease and no "
                         "Release.gpg); give the repository's signature, or mark it trusted");
    };
    try {
      fetcher.fetch_one(peek);
    } catch (const fetch::FetchError& e2) {
      if (absent(e2)) throw neither(e2);
      throw;
    }
    throw Error(base + "Release: refusing the repository: it is not signed (there is no InRelease and no "
                       "Release.gpg); give the repository's signature, or mark it trusted");
  }
  if (text) return *text;
  // Both from the store (offline, or a fetcher that runs no checks): checked again.
  fetch::Fetched rel = fetcher.fetch_one(rel_item);
  return verify_detached(store.blob_path(rel.digest), store.blob_path(sig->digest), lr.keyring, base + "Release");
}

}  // namespace

std::vector<LoadedRepository> load_repositories(const std::vector<Repository>& repos, const LoadOptions& o,
                                                const Store& store, fetch::Fetcher& fetcher, PackageIndex& index) {
  std::vector<LoadedRepository> out;
  // Each signed InRelease is checked (gpgv) before it enters the store; the
  // text checked is kept here. A repository taken on trust is not checked.
  std::vector<std::optional<std::string>> checked(repos.size());
  std::vector<fetch::FetchItem> releases;
  for (size_t i = 0; i < repos.size(); ++i) {
    const Repository& r = repos[i];
    releases.push_back({r.uri + "/dists/" + r.suite + "/InRelease", std::nullopt, std::nullopt,
                        "InRelease of " + r.suite});
    releases.back().max_size = limits::apt_release();  // nothing pins its size
    if (r.trusted) continue;
    fs::path keyring = r.signed_by.empty() ? o.default_keyring : r.signed_by;
    releases.back().check = [&checked, i, keyring, url = releases.back().url, r](const fs::path& file) {
      try {
        checked[i] = verify_inrelease(file, keyring, url);
      } catch (Error& e) {
        e.add_trace("while reading the repository " + r.id() + (r.where.empty() ? "" : " (" + r.where + ")"));
        throw;
      }
    };
  }
  // All at once; when one fails, one at a time to tell a repository without
  // an InRelease (it may have Release + Release.gpg) from a failure.
  std::vector<std::optional<fetch::Fetched>> fetched(repos.size());
  try {
    auto all = fetcher.fetch(releases);
    for (size_t i = 0; i < all.size(); ++i) fetched[i] = all[i];
  } catch (const fetch::FetchError&) {
    for (size_t i = 0; i < releases.size(); ++i) {
      try {
        fetched[i] = fetcher.fetch_one(releases[i]);
      } catch (fetch::FetchError& e) {
        std::string release = repos[i].uri + "/dists/" + repos[i].suite + "/Release";
        bool offline_detached = fetch::last_fetched(store, release) && !fetch::last_fetched(store, releases[i].url);
        if (absent(e) || offline_detached) continue;
        e.add_trace("while reading the repository " + repos[i].id() +
                    (repos[i].where.empty() ? "" : " (" + repos[i].where + ")"));
        throw;
      }
    }
  }
  std::vector<fetch::FetchItem> indexes;
  std::vector<std::string> index_names;
  for (size_t i = 0; i < repos.size(); ++i) {
    LoadedRepository lr{repos[i], {}, {}};
    Repository& r = lr.repo;
    std::string url = releases[i].url;
    try {
      std::string text;
      if (!fetched[i]) {
        text = detached_release(lr, o, store, fetcher);
      } else if (r.trusted) {
        text = strip_clearsign(store.read(fetched[i]->digest));
      } else {
        lr.keyring = r.signed_by.empty() ? o.default_keyring : r.signed_by;
        if (r.signed_by.empty()) lr.keyring_as = o.default_keyring_as;
        // Checked as it arrived, else (taken from the store) checked again now.
        text = checked[i] ? *checked[i] : verify_inrelease(store.blob_path(fetched[i]->digest), lr.keyring, url);
      }
      if (lr.detached) url = r.uri + "/dists/" + r.suite + "/Release";
      lr.release = parse_release(text);
      const ReleaseFile& rel = lr.release;
      if (rel.suite != r.suite && rel.codename != r.suite)
        throw Error(url + " is for suite '" + rel.suite + "' (codename '" + rel.codename + "'), not '" + r.suite + "'");
      if (r.check_valid_until && !rel.valid_until.empty()) {
        time_t until = parse_date(rel.valid_until);
        if (until && until < std::time(nullptr))
          throw Error(url + " expired on " + rel.valid_until +
                      " (a replayed or stale mirror?); a snapshot repository needs " +
                      (r.from_sources_file ? "check-valid-until=no (Check-Valid-Until: no in a .sources file)"
                                           : "`check_valid_until: false` in the recipe's repository"));
      }
      r.origin = rel.origin;
      if (auto pin = o.origin_pins.find(rel.origin); pin != o.origin_pins.end()) r.priority = pin->second;
      int n = index.add_repository(r);
      for (const auto& comp : r.components) {
        auto [path, file] = choose_index(rel, comp, o.architecture, url);
        std::string dir = path.substr(0, path.rfind('/') + 1);
        std::string fetch_url = rel.acquire_by_hash
                                    ? r.uri + "/dists/" + r.suite + "/" + dir + "by-hash/SHA256/" + file.sha256
                                    : r.uri + "/dists/" + r.suite + "/" + path;
        // Its size is pinned by the signed Release, but held in memory: capped too.
        if (file.size > limits::apt_index().bytes)
          throw Error(url + " lists " + path + " at " + std::to_string(file.size) + " bytes, over " +
                      limits::apt_index().describe());
        indexes.push_back({fetch_url, Digest::parse("sha256:" + file.sha256), file.size, r.suite + "/" + path});
        index_names.push_back(path);
        (void)n;
      }
    } catch (Error& e) {
      e.add_trace("while reading the repository " + r.id() + (r.where.empty() ? "" : " (" + r.where + ")"));
      throw;
    }
    out.push_back(lr);
  }
  auto got = fetcher.fetch(indexes);
  // Indexes of repository i follow in order; map each back to its repo number.
  size_t k = 0;
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t c = 0; c < out[i].repo.components.size(); ++c, ++k) {
      Digest key = KeyHasher().field("apt-packages-plain", got[k].digest.str()).finish();
      std::string text;
      if (auto rec = store.get_record("apt-index", key); rec && store.has(Digest::parse(*rec))) {
        text = store.read(Digest::parse(*rec));
      } else {
        text = decompress(store.read(got[k].digest), index_names[k]);
        store.put_record("apt-index", key, store.put(text).str());
      }
      index.add_packages(static_cast<int>(i), std::move(text));
    }
  index.finish();
  return out;
}

}  // namespace sb::apt

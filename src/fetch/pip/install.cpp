#include "fetch/pip/install.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/threads.hpp"

namespace sb::pip {

namespace {

// The METADATA that resolution read for a wheel without a PEP 658 file is
// kept by the wheel's sha256; when it was read by range requests it could not
// be hash-checked. Here the whole wheel has been, so what resolution used is
// compared with what the wheel holds: a difference (a server or cache that
// serves ranges of other bytes) replaces the kept text and stops the build,
// since what was resolved from it may be wrong.
void check_kept_metadata(const PinnedWheel& w, const fs::path& installed, const Store& store) {
  if (!w.sha256) return;
  auto kept = store.get_record("wheel-metadata", *w.sha256);
  if (!kept) return;
  std::string actual = read_file(installed);
  if (actual == *kept) return;
  store.put_record("wheel-metadata", *w.sha256, actual);
  throw Error("the METADATA in wheel " + w.filename + " (sha256 checked) is not the one read before from " + w.url +
              " by range requests, which the resolution used: the server answers ranges with other bytes. The "
              "kept METADATA is now the wheel's; run again to resolve with it");
}

}  // namespace

Installed install_wheels(const std::vector<PinnedWheel>& wheels, const Target& target, const fs::path& staging,
                         const Store& store, fetch::Fetcher& fetcher, bool allow_unhashed) {
  std::vector<fetch::FetchItem> items;
  for (const auto& w : wheels) {
    if (!w.sha256 && !allow_unhashed)
      throw Error("the index gives no sha256 for " + w.filename + " (" + w.url + "); stackbuild installs only "
                  "hash-checked wheels");
    items.push_back({w.url, w.sha256, w.size, w.filename});
  }
  std::vector<fetch::Fetched> got = fetcher.fetch(items);
  // Unpacking is CPU-bound (inflate, sha256): several wheels at once, the
  // biggest first; PathClaims keeps the result that of wheel order.
  std::vector<size_t> order(wheels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return got[a].size > got[b].size; });
  std::vector<std::optional<InstalledWheel>> done(wheels.size());
  std::vector<std::optional<Error>> failed(wheels.size());
  PathClaims claims;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < order.size();) {
      size_t i = order[k];
      try {
        done[i] = install_wheel(store.blob_path(got[i].digest), wheels[i].filename, target, staging,
                                wheels[i].requested, &claims, static_cast<int>(i));
      } catch (const Error& e) {
        failed[i] = e;
      } catch (const std::exception& e) {
        failed[i] = Error(e.what());
      }
    }
  };
  size_t threads = std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, wheels.size()});
  run_on_threads(threads, work);
  Installed out;
  for (size_t i = 0; i < wheels.size(); ++i) {
    if (failed[i]) {
      Error e = *failed[i];
      e.add_trace("while installing " + wheels[i].filename);
      throw e;
    }
    check_kept_metadata(wheels[i], staging / done[i]->dist_info / "METADATA", store);
    out.bytes += done[i]->bytes;
    out.wheels.push_back(std::move(*done[i]));
  }
  return out;
}

std::vector<std::string> check_wheels(const std::vector<PinnedWheel>& wheels, const Target& target,
                                      const std::set<std::string>& provided) {
  MarkerEnv env = MarkerEnv::linux_cpython(target.python, target.machine);
  std::map<std::string, const PinnedWheel*> by_key;
  for (const auto& w : wheels) by_key[w.key.empty() ? normalize_name(w.name) : w.key] = &w;
  std::vector<std::string> problems;
  for (const auto& w : wheels)
    for (const auto& text : w.requires_dist) {
      Requirement r = Requirement::parse(text);
      if (!r.applies(env, w.extras) || provided.count(r.key)) continue;
      auto it = by_key.find(r.key);
      if (it == by_key.end()) {
        problems.push_back(w.name + " " + w.version + " requires " + r.name + ", which is not installed");
      } else if (!r.specifier.contains(Version::parse(it->second->version), true)) {
        problems.push_back(w.name + " " + w.version + " has requirement " + r.str() + ", but you have " +
                           it->second->name + " " + it->second->version);
      }
    }
  return problems;
}

}  // namespace sb::pip

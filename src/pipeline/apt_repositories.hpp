// Which repositories an apt layer reads, and how it fetches from them: the
// point's distribution, the layer's or recipe's `repositories:` else the
// defaults (STACKBUILD_APT_SOURCES, the machine's apt configuration, the
// public archives), origin pins, and the run's apt network settings
// (proxies, CAs, logins). Used by pipeline/apt_layer.cpp.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fetch/apt/config.hpp"
#include "fetch/apt/sources.hpp"
#include "fetch/fetcher.hpp"
#include "pipeline/point_inputs.hpp"
#include "recipe/recipe.hpp"
#include "util/status.hpp"

namespace sb {

struct Distro {
  std::string name;      // debian, ubuntu
  std::string codename;  // trixie, noble
};

// The distribution of the point: the layer's own version, else the point's
// `os`; a number ("13") is looked up in the os records of the plan's catalog.
// The codename is "" when neither says.
Distro distro_of(const LayerSpec& spec, const std::map<std::string, std::string>& vars, const PointInputs& point);

// The machine's apt network settings (proxies, CA files, TLS checks, logins:
// fetch/apt/config.hpp), read from STACKBUILD_APT_ROOT (default /) and APT_CONFIG
// once a run: every apt layer of every point shares them, so apt.conf is read
// and a Proxy-Auto-Detect command asked about a host once, not per layer.
std::shared_ptr<apt::AptNetwork> run_network();

// The options of the apt stage's fetches: the defaults, each URL routed by
// `net`, and the hints its errors give.
fetch::FetchOptions apt_fetch_options(const std::shared_ptr<apt::AptNetwork>& net);

// What the apt stage fetches with: the defaults and the run's apt network
// settings for each URL; `net` also takes the logins of repository URLs as
// they are read.
struct AptFetcher {
  std::shared_ptr<apt::AptNetwork> net;
  std::unique_ptr<fetch::Fetcher> fetcher;
};
AptFetcher apt_fetcher(const Store& store, Status& status,
                       const fetch::FetcherFactory& make_fetcher = fetch::make_fetcher);

// The repositories of one apt layer: its own `repositories:`, else the
// recipe's, else the defaults (`default` among them stands for those), each
// login written into a URL taken out of it (so that no lockfile, image or
// message holds it) and handed to `net` for the fetches.
std::vector<apt::Repository> layer_repositories(const Recipe& recipe, const LayerSpec& spec, const Distro& d,
                                                Status& status, apt::AptNetwork& net);

// Pins by origin: STACKBUILD_APT_PINS, then the recipe's `pins:`, then the layer's.
std::map<std::string, int> layer_pins(const Recipe& recipe, const LayerSpec& spec);

}  // namespace sb

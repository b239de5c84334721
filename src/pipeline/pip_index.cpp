#include "pipeline/pip_index.hpp"

#include "util/error.hpp"
#include "util/process.hpp"

namespace sb {

pip::IndexConfig index_config(const Store& store, const std::string& explicit_url) {
  std::string setting = explicit_url.empty() ? env_or("STACKBUILD_PIP_INDEX_URL", "") : explicit_url;
  return pip::index_config(setting, "/", current_environment(), [&] { return pip::pip_default_index(store); });
}

std::map<std::string, std::string> pip_index_environment(const Store& store) {
  std::map<std::string, std::string> env;
  pip::IndexConfig cfg;
  try {
    cfg = index_config(store);
  } catch (const Error&) {
    return env;  // no index configured anywhere: the step's pip keeps its own default
  }
  if (cfg.urls.empty()) return env;
  env["PIP_INDEX_URL"] = cfg.urls.front();
  std::string extra;
  for (size_t i = 1; i < cfg.urls.size(); ++i) extra += (extra.empty() ? "" : " ") + cfg.urls[i];
  if (!extra.empty()) env["PIP_EXTRA_INDEX_URL"] = extra;
  if (!cfg.proxy.empty()) env["PIP_PROXY"] = cfg.proxy;
  std::string trusted;
  for (const auto& h : cfg.trusted_hosts) trusted += (trusted.empty() ? "" : " ") + h;
  if (!trusted.empty()) env["PIP_TRUSTED_HOST"] = trusted;
  return env;
}

}  // namespace sb

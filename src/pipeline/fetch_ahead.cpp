#include "pipeline/fetch_ahead.hpp"

#include <set>

#include "pipeline/layer_kind.hpp"
#include "pipeline/matrix_build.hpp"
#include "util/interrupt.hpp"

namespace sb {

FetchAhead::FetchAhead(const std::vector<MatrixPoint>& points, const Store& store, const BuildOptions& options,
                       Status& status)
    : status_(scoped_status(status, "ahead")) {
  try {
    thread_ = std::thread([this, &points, &store, options] { run(points, store, options); });
  } catch (const std::system_error&) {  // no thread: the layers fetch for themselves
  }
}

FetchAhead::~FetchAhead() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void FetchAhead::wait() {
  if (thread_.joinable()) thread_.join();
}

void FetchAhead::run(const std::vector<MatrixPoint>& points, const Store& store, const BuildOptions& build) {
  std::set<std::string> seen;  // sha256: a file two points pin is fetched once
  size_t files = 0, failed = 0;
  uint64_t bytes = 0;
  bool stopped = false;
  auto halted = [&] { return stopped = stopped || stop_ || interrupted(); };
  auto fetch_layer = [&](const MatrixPoint& point, const BuildOptions& options, const LayerSpec& spec) {
    AheadFetch ahead = layer_kind_of(spec).fetch_ahead(point.recipe, spec, options, store, *status_);
    std::vector<fetch::FetchItem> todo;
    for (auto& item : ahead.items)
      if (item.sha256 && seen.insert(item.sha256->str()).second) todo.push_back(std::move(item));
    if (todo.empty()) return;
    auto fetcher = options.services.make_fetcher(store, ahead.options, *status_);
    // A few files at a time, so that a build that stops waits for those only.
    const size_t batch = static_cast<size_t>(std::max(1, ahead.options.jobs));
    for (size_t i = 0; i < todo.size() && !halted(); i += batch) {
      const std::vector<fetch::FetchItem> some(todo.begin() + i, todo.begin() + std::min(todo.size(), i + batch));
      try {
        fetcher->fetch(some);
      } catch (const std::exception& e) {  // the layer fetches it again, and reports its own error
        status_->message(Level::Debug, "layer " + spec.name + ": " + e.what() + " (the layer fetches it itself)");
      }
      for (const auto& item : some) {
        if (store.has(*item.sha256)) {
          ++files;
          bytes += item.size.value_or(0);
        } else {
          ++failed;
        }
      }
    }
  };
  for (const auto& point : points) {
    if (point.inputs.lock.empty()) continue;
    const BuildOptions options = point_build_options(point, build);
    for (const auto& spec : point.recipe.layers) {
      if (halted()) break;
      try {
        fetch_layer(point, options, spec);
      } catch (const std::exception& e) {  // what it pins could not be worked out: the layer says why
        status_->message(Level::Debug, "layer " + spec.name + ": " + e.what() + " (the layer fetches it itself)");
      }
    }
  }
  // What it did, so that a user sees whether it paid (docs/layers.md).
  std::string told = std::to_string(files) + (files == 1 ? " file, " : " files, ") +
                     human_bytes(static_cast<double>(bytes)) + " fetched ahead of their layers";
  if (failed) told += "; " + std::to_string(failed) + " failed, left to their layers";
  if (stopped) told += "; stopped before the rest, as the build ended";
  status_->message(Level::Info, told);
}

}  // namespace sb

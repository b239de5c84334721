// Inputs fetched ahead. A --locked build knows, before any layer is built,
// every apt package, wheel and redist archive each point's layers will download (the
// lockfile pins them; LayerKind::fetch_ahead). build_points fetches them on a
// thread of its own, in build order, while the layers before them are built,
// so that downloading overlaps unpacking, installing and compressing (the
// next point's wheels arrive while this point's layers are written).
//
// The layers still fetch what they need themselves: a file fetched ahead is
// then in the store, or being fetched (the fetcher holds a lock per download,
// and the layer waits for it); a download that failed ahead is tried again by
// its layer, whose error is the one the build reports. Nothing fetched ahead
// enters the store unchecked: the fetcher checks each file's sha256 and size.
// See docs/layers.md, "Inputs fetched ahead".
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "pipeline/build_options.hpp"

namespace sb {

struct MatrixPoint;

class FetchAhead {
 public:
  // Starts fetching for `points` (those with a lockfile's pins) with
  // `options` (each point's inputs in place of options.point), reporting
  // through `status`, which must outlive it.
  FetchAhead(const std::vector<MatrixPoint>& points, const Store& store, const BuildOptions& options, Status& status);
  // Stops: the downloads running end (at most a few files), then it returns.
  ~FetchAhead();
  // Waits until everything is fetched (or has failed), for tests.
  void wait();
  FetchAhead(const FetchAhead&) = delete;
  FetchAhead& operator=(const FetchAhead&) = delete;

 private:
  void run(const std::vector<MatrixPoint>& points, const Store& store, const BuildOptions& options);

  std::unique_ptr<Status> status_;  // "ahead: fetch 8 files"
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sb

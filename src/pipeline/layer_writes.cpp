#include "pipeline/layer_writes.hpp"

#include <algorithm>

#include "util/resources.hpp"

namespace sb {

std::vector<Layer> PendingLayer::settle(const std::vector<Layer>& below, const std::vector<std::string>& names) {
  auto start = std::chrono::steady_clock::now();
  std::vector<Layer> parts = written_.get();  // throws the write's error
  waited_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  finish_(below, names, parts);
  return parts;
}

LayerWrites::LayerWrites(size_t at_once) : slots_(std::make_shared<Slots>()) {
  slots_->at_once = std::max<size_t>(1, at_once);
}

std::shared_ptr<PendingLayer> LayerWrites::start(std::function<std::vector<Layer>()> write,
                                                 PendingLayer::Finish finish) {
  std::shared_ptr<Slots> slots = slots_;
  {
    std::unique_lock lock(slots->mu);
    slots->cv.wait(lock, [&] { return slots->running < slots->at_once; });
    slots->most = std::max(slots->most, ++slots->running);
  }
  // The slot is given back when the write ends, however it ends.
  auto give_back = [slots] {
    std::lock_guard g(slots->mu);
    --slots->running;
    slots->cv.notify_one();
  };
  std::future<std::vector<Layer>> written;
  try {
    written = std::async(std::launch::async, [write = std::move(write), give_back] {
      struct Guard {
        const decltype(give_back)& f;
        ~Guard() { f(); }
      } guard{give_back};
      return write();
    });
  } catch (...) {  // no thread: the write never ran
    give_back();
    throw;
  }
  return std::make_shared<PendingLayer>(std::move(written), std::move(finish));
}

size_t LayerWrites::most_at_once() const {
  std::lock_guard g(slots_->mu);
  return slots_->most;
}

size_t default_write_ahead() {
  return std::max<size_t>(1, usable_cores() / 4);
}

}  // namespace sb

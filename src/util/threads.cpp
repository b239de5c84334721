#include "util/threads.hpp"

#include <system_error>

namespace sb {

std::vector<std::thread> start_threads(size_t n, const std::function<void()>& worker) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // EAGAIN: the threads already running share the work
    }
  }
  return threads;
}

void run_on_threads(size_t n, const std::function<void()>& worker) {
  std::vector<std::thread> threads = start_threads(n > 0 ? n - 1 : 0, worker);
  try {
    worker();
  } catch (...) {
    for (auto& t : threads) t.join();
    throw;
  }
  for (auto& t : threads) t.join();
}

}  // namespace sb

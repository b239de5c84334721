// Worker threads that the system may refuse. A container's pids limit makes
// std::thread throw EAGAIN; a vector of started threads that unwinds then
// calls std::terminate on the joinable ones. Every pool here shares its work
// through common state, so fewer threads only means less parallelism.
#pragma once

#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace sb {

// Starts up to `n` threads running `worker` and returns those the system
// allowed (possibly none; the caller then does the work itself).
std::vector<std::thread> start_threads(size_t n, const std::function<void()>& worker);

// Runs `worker` on up to `n` threads, the calling thread being one of them,
// and returns once all have returned. Workers take their items from shared
// state, so a refused thread leaves its share to the others.
void run_on_threads(size_t n, const std::function<void()>& worker);

}  // namespace sb

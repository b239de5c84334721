// fuzz_replay TARGET PATH...: runs the fuzz target TARGET over each file, and
// each file in each directory, in name order. A finding aborts, after saying
// which input it was; the exit status is then that of the abort.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>

#include "fuzz.hpp"

namespace {

char g_current[4096] = "(none)";

void say_current() {
  const char* head = "fuzz_replay: the input was ";
  ssize_t r = ::write(2, head, std::strlen(head));
  r = ::write(2, g_current, std::strlen(g_current));
  r = ::write(2, "\n", 1);
  (void)r;
}

void on_signal(int sig) {
  say_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  sb::fuzz::Target target = argc >= 3 ? sb::fuzz::find_target(argv[1]) : nullptr;
  if (!target) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH...\ntargets:");
    for (const auto& name : sb::fuzz::target_names()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::set_terminate([] {
    if (auto e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "fuzz_replay: an exception escaped: %s\n", x.what());
      } catch (...) {
        std::fprintf(stderr, "fuzz_replay: an exception of unknown type escaped\n");
      }
    }
    say_current();
    ::signal(SIGABRT, SIG_DFL);  // said once is enough
    std::abort();
  });
  // Under AddressSanitizer its own handlers say more (where, and the stack).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr bool sanitized = true;
#else
  constexpr bool sanitized = false;
#endif
#else
  constexpr bool sanitized = false;
#endif
  if (!sanitized)
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, on_signal);

  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    fs::path p = argv[i];
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "fuzz_replay: no such file or directory: %s\n", p.c_str());
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs for %s\n", argv[1]);
    return 2;
  }
  for (const auto& p : inputs) {
    std::snprintf(g_current, sizeof g_current, "%s", p.c_str());
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay: %s: %zu inputs, no findings\n", argv[1], inputs.size());
  return 0;
}

#include "util/interrupt.hpp"

#include <csignal>

#include "util/error.hpp"

namespace sb {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) {
  if (g_signal) {  // the second time: the user means it
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_signal != 0; }

const char* interruption() {
  if (!g_signal) return nullptr;
  return g_signal == SIGINT ? "interrupted" : "terminated";
}

void check_interrupted() {
  if (const char* why = interruption()) throw Error(why, ErrorKind::Interrupted);
}

}  // namespace sb

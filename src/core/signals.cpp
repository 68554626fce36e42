#include "core/signals.h"

#include <csignal>

namespace tt {

namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop(int sig) {
  g_stop = sig == SIGUSR1 ? SIGINT : sig == SIGUSR2 ? SIGTERM : sig;  // the launcher's words for them
  std::signal(sig, SIG_DFL);  // the next one stops at once
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_stop);
  std::signal(SIGUSR2, on_stop);
}

void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

int stop_requested() { return int(g_stop); }

}  // namespace tt

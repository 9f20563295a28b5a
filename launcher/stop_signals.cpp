// StopSignals: the handler and its one flag.
#include "stop_signals.h"

#include <atomic>
#include <csignal>

namespace lockstep {
namespace {

// Lock-free, so the handler may write it and any thread (the training loop,
// the watchdog) may read it.
std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free);
struct sigaction g_saved_term, g_saved_usr1;

void on_stop_signal(int sig) {
  if (g_pending.load() != 0) {  // the second request: the default action (terminate)
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_pending.store(sig);
}

}  // namespace

StopSignals::StopSignals() {
  g_pending.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, &g_saved_term);
  sigaction(SIGUSR1, &sa, &g_saved_usr1);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &g_saved_term, nullptr);
  sigaction(SIGUSR1, &g_saved_usr1, nullptr);
}

int StopSignals::pending() const { return g_pending.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace lockstep

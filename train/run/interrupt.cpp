#include "train/run/interrupt.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <unistd.h>

namespace mixlab {

namespace {

// Plain std::atomic<int> is only safe in a signal handler when it is lock-free.
static_assert(std::atomic<int>::is_always_lock_free);

std::atomic<int> g_signal{0};  // the signal that arrived first, 0 while none has
bool g_installed = false;
struct sigaction g_previous_int;
struct sigaction g_previous_term;

void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    static const char kMessage[] =
        "\ninterrupted: stopping after the current step (press Ctrl-C again to quit now)\n";
    // Nothing to do about a failed write from inside a handler.
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    return;
  }
  // Second signal: default action. The signal is blocked while this handler runs, so the
  // re-raised one is delivered (and kills the process) as soon as the handler returns.
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof fallback);
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(sig, &fallback, nullptr);
  ::raise(sig);
}

}  // namespace

void install_interrupt_handler() {
  g_signal.store(0);
  if (g_installed) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  // Block the other signal too while handling one, so that a SIGINT and a SIGTERM arriving
  // together count as first and second in a well-defined order.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &g_previous_int);
  ::sigaction(SIGTERM, &action, &g_previous_term);
  g_installed = true;
}

void uninstall_interrupt_handler() {
  if (!g_installed) return;
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
  g_installed = false;
}

bool interrupted() { return g_signal.load() != 0; }

int interrupt_signal() { return g_signal.load(); }

void clear_interrupt() { g_signal.store(0); }

}  // namespace mixlab

// Graceful Ctrl-C for training: the first SIGINT or SIGTERM only sets a flag, which the training
// loop polls between steps to save a checkpoint and stop cleanly. A second one restores the
// default action and re-raises it, so the user can always kill a run that does not stop.
//
// The handler is async-signal-safe: it touches a lock-free atomic, write(2)s a fixed message to
// stderr, and calls sigaction/raise, all of which POSIX allows in a handler. It is installed
// with SA_RESTART so that blocking reads in the data loader are not failed with EINTR.
#pragma once

namespace mixlab {

// Installs the handler for SIGINT and SIGTERM (idempotent) and clears the flag.
void install_interrupt_handler();

// Restores the handlers that were in place before install_interrupt_handler() (no-op if not
// installed); the flag keeps its value.
void uninstall_interrupt_handler();

// True once SIGINT or SIGTERM arrived since install/clear.
bool interrupted();

// The signal that set the flag (SIGINT or SIGTERM), or 0; for an exit status of 128 + signal.
int interrupt_signal();

// Resets the flag, so that the next signal is again "first" (e.g. after saving, when the caller
// decides to carry on).
void clear_interrupt();

}  // namespace mixlab

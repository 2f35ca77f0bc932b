// Stopping a long command cleanly: the first SIGINT (Ctrl-C) or SIGTERM (what Slurm, Kubernetes,
// mpirun, `reel launch` and `timeout` send) sets a flag that work able to stop cleanly polls
// through Poll() — training finishes its step and writes a checkpoint, a search lets its running
// trials do so — and the command returns Cancelled. A second signal of either kind ends the
// process at once.
//
// Work that cannot poll (forming the group, opening data, `reel eval`) must still end promptly:
// when a signal arrives and nothing has polled within kGrace of it, the process ends with status
// 130, saying so (docs/reliability.md). Once work has polled — the training loop polls between
// steps — it owns the stop: the step, an evaluation or checkpoint under way, and the final
// checkpoint are finished first.
//
// A scope ends when its command's work does, just before reel prints the outcome and exits: from
// then on both signals are ignored. Restoring the default action instead would let a signal in
// that gap — `reel launch` stopping the ranks a failed rank left behind — end the process
// silently, before it says why it failed.
//
// Outside a scope, from the start of main (ExitOnInterrupt), SIGINT and SIGTERM end reel at once
// with status 130 and a line on stderr: every interrupted reel command, core or plugin, exits
// 130 on either signal, as docs/training.md says.
//
// Thread-safety: one scope at a time, created and destroyed on the main thread; Requested() and
// Poll() may be called from any thread.
#ifndef REEL_CORE_CLI_INTERRUPT_H_
#define REEL_CORE_CLI_INTERRUPT_H_

#include <chrono>
#include <thread>

namespace reel::cli {

// Installs the handler that ends the process with status 130 on SIGINT or SIGTERM.
void ExitOnInterrupt();

class InterruptScope {
 public:
  // How long after a signal the process ends if nothing has polled.
  static constexpr std::chrono::milliseconds kGrace{1000};

  InterruptScope();   // clears the flag and installs the handler for SIGINT and SIGTERM
  ~InterruptScope();  // ignores SIGINT and SIGTERM until the process exits
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // True once SIGINT or SIGTERM arrived while a scope was installed.
  static bool Requested();
  // Requested(), from work that polls again soon and stops cleanly when it returns true: from
  // the first call on, a request is that work's to finish and the process is not ended under it.
  static bool Poll();

 private:
  void Watch();
  std::thread watchdog_;
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_INTERRUPT_H_

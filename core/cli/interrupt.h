// Stopping a long command cleanly: the first SIGINT (Ctrl-C) or SIGTERM (what Slurm, Kubernetes,
// mpirun, `reel launch` and `timeout` send) sets a flag the command polls — training finishes its
// step and writes a checkpoint, a search lets its running trials do so — and the command returns
// Cancelled. A second signal of either kind ends the process at once.
//
// Thread-safety: one scope at a time, created and destroyed on the main thread; Requested() may be
// polled from any thread.
#ifndef REEL_CORE_CLI_INTERRUPT_H_
#define REEL_CORE_CLI_INTERRUPT_H_

namespace reel::cli {

class InterruptScope {
 public:
  InterruptScope();   // clears the flag and installs the handler for SIGINT and SIGTERM
  ~InterruptScope();  // restores the previous handlers
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // True once SIGINT or SIGTERM arrived while a scope was installed.
  static bool Requested();

 private:
  void (*previous_int_)(int) = nullptr;
  void (*previous_term_)(int) = nullptr;
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_INTERRUPT_H_

// Stopping a long command cleanly: the first SIGINT (Ctrl-C) or SIGTERM (what Slurm, Kubernetes,
// mpirun, `reel launch` and `timeout` send) sets a flag that work able to stop cleanly polls
// through Poll() — training finishes its step and writes a checkpoint, a search lets its running
// trials do so — and the command returns Cancelled. A second signal does not cut that short
// (Slurm and the sbatch examples send TERM after TERM; SIGKILL is the hard stop), except a second
// Ctrl-C typed on the terminal, which ends the process at once with status 130.
//
// No thread of reel's ever runs a signal handler for these signals: they are blocked in every
// thread (from the start of main, so every later thread inherits the mask) and one watcher thread
// takes them with sigwaitinfo. A handler interrupts whatever its thread runs, and oneDNN 2.6's JIT
// GEMM kernels point the stack pointer into the heap, so the kernel's signal frame overwrote heap
// memory (glibc aborts later; oneDNN issue 4845, fixed in 3.11). Blocking also spares every
// system call an EINTR.
//
// Work that cannot poll (forming the group, opening data, `reel eval`) must still end promptly:
// when a signal arrives and nothing has polled within kGrace of it, the process ends with status
// 130, saying so (docs/reliability.md). Once work has polled — the training loop polls between
// steps — it owns the stop: the step, an evaluation or checkpoint under way, and the final
// checkpoint are finished first. When a scope ends, just before reel prints the outcome, both
// signals are ignored (one then would only cut off the message saying why a run failed).
// Outside a scope, from the start of main (ExitOnInterrupt), either signal ends reel at once with
// status 130 and a line on stderr, whatever the command, core or plugin (docs/training.md).
//
// Thread-safety: ExitOnInterrupt() first, on the main thread, before any other thread starts;
// one scope at a time, made and destroyed on one thread; Requested() and Poll() from any thread.
#ifndef REEL_CORE_CLI_INTERRUPT_H_
#define REEL_CORE_CLI_INTERRUPT_H_

#include <chrono>

namespace reel::cli {

// Blocks SIGINT and SIGTERM in the calling thread and starts the watcher, which ends the process
// with status 130 on either signal while no scope or forwarding is in place.
void ExitOnInterrupt();

class InterruptScope {
 public:
  // How long after a signal the process ends if nothing has polled.
  static constexpr std::chrono::milliseconds kGrace{1000};

  InterruptScope();   // clears the flag; signals become stop requests
  ~InterruptScope();  // ignores SIGINT and SIGTERM until the process exits
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // True once SIGINT or SIGTERM arrived while a scope was in place.
  static bool Requested();
  // Requested(), from work that polls again soon and stops cleanly when it returns true: from
  // the first call on, a request is that work's to finish and the process is not ended under it.
  static bool Poll();
};

// While alive, each SIGINT and SIGTERM is written to `fd` (its number, one int) instead of being
// acted on: `reel launch` passes them on to its ranks. `fd` must outlive this object.
class ForwardStopSignals {
 public:
  explicit ForwardStopSignals(int fd);
  ~ForwardStopSignals();
  ForwardStopSignals(const ForwardStopSignals&) = delete;
  ForwardStopSignals& operator=(const ForwardStopSignals&) = delete;
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_INTERRUPT_H_

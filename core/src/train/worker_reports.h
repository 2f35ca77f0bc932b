// Training ranks that step independently (an optimizer with server-only ranks: the servers, not a
// per-step collective, keep them together) tell the lead where they are with point-to-point
// reports instead of collectives, so one that dies is dropped instead of stopping the others.
//
// Every other training rank sends the lead (rank 0 of the training group) a report when it starts
// (its data position then), at every checkpoint step, and when it finishes or is interrupted.
// Reports of one rank arrive in the order sent; the lead reads them only when it needs them
// (CatchUp) and waits for none that a rank cannot send: a rank whose receive fails with
// Unavailable (its connection was lost) or passes the deadline is lost, and keeps the last
// position it reported, from which a resume trains the rest of its share again.
//
// Thread-safety: one thread (the rank's trainer).
#ifndef REEL_CORE_SRC_TRAIN_WORKER_REPORTS_H_
#define REEL_CORE_SRC_TRAIN_WORKER_REPORTS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "reel/core/trainer.h"
#include "reel/optimizer.h"
#include "reel/transport.h"

namespace reel::core {

// A user tag of the training group (below kSubgroupUserTags, so it also fits a split group).
constexpr int kWorkerReportTag = 900;

enum class ReportKind : uint32_t { kStart = 1, kCheckpoint = 2, kFinal = 3 };

struct WorkerReport {
  ReportKind kind = ReportKind::kStart;
  int rank = -1;         // the sender's rank in the whole world (for messages)
  int64_t step = 0;      // steps taken, counting those before a resume
  int64_t examples = 0;  // examples this rank trained on in this session
  std::string position;  // its data position (DataSource::Position)
};

// A training rank other than the lead: sends `report` to the lead.
Status SendWorkerReport(Communicator& group, const WorkerReport& report,
                        std::chrono::milliseconds timeout);

// The lead's view of the other training ranks.
class WorkerReports {
 public:
  static constexpr int64_t kFinal = std::numeric_limits<int64_t>::max();

  WorkerReports(Communicator& group, std::chrono::milliseconds timeout);

  // Reads every other rank's reports until it has one at `step` or later, its final one, or the
  // rank is lost (kFinal: until the final one). Errors only for a malformed report.
  Status CatchUp(int64_t step);
  // Reads the reports that have arrived, waiting for none: a checkpoint then holds each rank's
  // newest reported position without holding the lead for slower ranks (a rank's data since its
  // last report is trained again after a resume). Errors only for a malformed report.
  Status Poll();
  // Every training rank's newest position, group rank 0's being `lead_position`.
  std::vector<std::string> Positions(const std::string& lead_position) const;
  // Examples the other ranks reported having trained on.
  int64_t Examples() const;
  // The ranks lost so far; `budget_steps` is every rank's step budget (0: unknown). `applied`
  // holds, by world rank, what the optimizer applied of a lost rank's work (AppliedWorkOf): its
  // share is then counted from there instead of from its last report.
  std::vector<LostRank> Lost(int64_t budget_steps,
                             const std::map<int, AppliedWork>& applied = {}) const;

 private:
  struct View;
  // Reads one report of group rank `w` into `v` by `deadline`. False if none came: the rank is
  // then lost (its connection failed, or `timeout_loses` and the deadline passed).
  Result<bool> ReadOne(int w, View& v, Deadline deadline, bool timeout_loses);

  struct View {
    WorkerReport last;
    int64_t start_step = 0;  // its step when this session started
    bool final = false;
    std::string lost;  // why, empty while alive
  };
  Communicator& group_;
  const std::chrono::milliseconds timeout_;
  std::vector<View> views_;  // by group rank; [0] (the lead) unused
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_WORKER_REPORTS_H_

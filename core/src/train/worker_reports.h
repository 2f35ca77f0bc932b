// Training ranks that step independently (an optimizer with server-only ranks: the servers, not a
// per-step collective, keep them together) tell the lead where they are with point-to-point
// reports instead of collectives, so one that dies is dropped instead of stopping the others.
//
// Every other training rank sends the lead (rank 0 of the training group, until it is lost) a
// report when it starts (its data position then), at every checkpoint step, and when it finishes
// or is interrupted. Reports of one rank arrive in the order sent; the lead reads them only when
// it needs them (CatchUp) and waits for none that a rank cannot send: a rank whose receive fails
// with Unavailable (its connection was lost) or passes the deadline is lost, and keeps the last
// position it reported, from which a resume trains the rest of its share again.
//
// The lead sends its own reports (start, checkpoints) to every other rank on a tag of its own,
// and when it has written the final checkpoint, an end (kEnd): the others wait for that before
// they leave, so that whichever of them takes over a lost lead's duties (reel/core/trainer.h)
// knows where the lead's data stood and none has left before the run's end was written.
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
// The lead's own reports and its end, to every other training rank.
constexpr int kLeadReportTag = 901;

// kEnd: the lead wrote the final checkpoint (lead reports only).
enum class ReportKind : uint32_t { kStart = 1, kCheckpoint = 2, kFinal = 3, kEnd = 4 };

struct WorkerReport {
  ReportKind kind = ReportKind::kStart;
  int rank = -1;           // the sender's rank in the whole world (for messages)
  int64_t step = 0;        // steps taken, counting those before a resume
  int64_t start_step = 0;  // its step when this session started
  int64_t examples = 0;    // examples this rank trained on in this session
  int64_t epoch = 0;       // the epoch `position` is in
  std::string position;    // its data position (DataSource::Position)
};

// Sends `report` to training rank `to`: a report to the lead, or (kLeadReportTag) the lead's own.
Status SendWorkerReport(Communicator& group, int to, int tag, const WorkerReport& report,
                        std::chrono::milliseconds timeout);

// A training rank's view of the others: the lead's (their reports), or another rank's (the
// lead's reports, until it takes over).
class WorkerReports {
 public:
  static constexpr int64_t kFinal = std::numeric_limits<int64_t>::max();

  WorkerReports(Communicator& group, std::chrono::milliseconds timeout);

  // Not the lead: waits for `lead`'s end (kEnd), keeping its reports. Errors: Unavailable or
  // DeadlineExceeded when it was lost or silent past the deadline, DataLoss for a malformed one.
  Status AwaitEnd(int lead);
  // Taking over from `lead`, lost with `why`: keeps its reports that have arrived and counts it
  // lost (`world_rank` names it if it never reported).
  Status LoseLead(int lead, int world_rank, const std::string& why);
  // The lead: sends `report` to every other rank not known lost (kLeadReportTag); a rank it
  // cannot reach is left to show its loss where its reports are awaited.
  void TellOthers(const WorkerReport& report);

  // Reads every other rank's reports until it has one at `step` or later, its final one, or the
  // rank is lost (kFinal: until the final one). Errors only for a malformed report.
  Status CatchUp(int64_t step);
  // Reads the reports that have arrived, waiting for none: a checkpoint then holds each rank's
  // newest reported position without holding the lead for slower ranks (a rank's data since its
  // last report is trained again after a resume). Errors only for a malformed report.
  Status Poll();
  // Every training rank's newest position, this rank's being `lead_position`.
  std::vector<std::string> Positions(const std::string& lead_position) const;
  // Every training rank's epoch of that position, and its steps taken there, this rank's being
  // `lead_epoch` and `lead_step`.
  std::vector<int64_t> Epochs(int64_t lead_epoch) const;
  std::vector<int64_t> Steps(int64_t lead_step) const;
  // Examples the other ranks reported having trained on.
  int64_t Examples() const;
  // The ranks lost so far; `budget_steps` is every rank's step budget (0: unknown). `applied`
  // holds, by world rank, what the optimizer applied of a lost rank's work (AppliedWorkOf): its
  // share is then counted from there instead of from its last report.
  std::vector<LostRank> Lost(int64_t budget_steps,
                             const std::map<int, AppliedWork>& applied = {}) const;

 private:
  // Every training rank's `field` of its newest report, this rank's being `mine`.
  template <typename T>
  std::vector<T> Newest(const T& mine, T WorkerReport::*field) const;
  struct View;
  // Reads one report of group rank `w` (on `tag`) into `v` by `deadline`. False if none came: the
  // rank is then lost (its connection failed, or `timeout_loses` and the deadline passed).
  Result<bool> ReadOne(int w, View& v, Deadline deadline, bool timeout_loses,
                       int tag = kWorkerReportTag);

  struct View {
    WorkerReport last;
    bool final = false;  // its final report (or the lead's end) arrived
    std::string lost;    // why, empty while alive
    Status lost_status;  // the same as a status
  };
  Communicator& group_;
  const std::chrono::milliseconds timeout_;
  std::vector<View> views_;  // by group rank; this rank's own unused
};

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_WORKER_REPORTS_H_

// Reports of independently stepping training ranks to their lead (see worker_reports.h).
#include "train/worker_reports.h"

#include <cstring>

namespace reel::core {
namespace {

// On the wire: this header, then the position's bytes.
struct ReportHeader {
  uint32_t kind = 0;
  int32_t rank = -1;
  int64_t step = 0;
  int64_t start_step = 0;
  int64_t examples = 0;
  int64_t epoch = 0;
};
static_assert(sizeof(ReportHeader) == 40);

}  // namespace

Status SendWorkerReport(Communicator& group, int to, int tag, const WorkerReport& report,
                        std::chrono::milliseconds timeout) {
  const ReportHeader h{static_cast<uint32_t>(report.kind),
                       report.rank,
                       report.step,
                       report.start_step,
                       report.examples,
                       report.epoch};
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes += report.position;
  return group.Send(to, tag, std::as_bytes(std::span<const char>(bytes)), DeadlineIn(timeout))
      .WithContext("training rank " + std::to_string(group.rank()) +
                   (tag == kLeadReportTag ? " (the lead) reporting to training rank "
                                          : " reporting its progress to the lead, training rank ") +
                   std::to_string(to));
}

WorkerReports::WorkerReports(Communicator& group, std::chrono::milliseconds timeout)
    : group_(group), timeout_(timeout), views_(static_cast<size_t>(group.size())) {}

Result<bool> WorkerReports::ReadOne(int w, View& v, Deadline deadline, bool timeout_loses,
                                    int tag) {
  Result<Message> m = group_.Recv(w, tag, deadline);
  if (!m.ok()) {
    const StatusCode code = m.status().code();
    if (code == StatusCode::kDeadlineExceeded && !timeout_loses) return false;
    if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded)
      return m.status().WithContext("the lead waiting for training rank " + std::to_string(w));
    v.lost = m.status().ToString();
    v.lost_status = m.status();
    return false;
  }
  ReportHeader h;
  if (m->payload.size() < sizeof h)
    return DataLossError("training rank " + std::to_string(w) + " sent a report of " +
                         std::to_string(m->payload.size()) + " bytes");
  std::memcpy(&h, m->payload.data(), sizeof h);
  const ReportKind last = tag == kLeadReportTag ? ReportKind::kEnd : ReportKind::kFinal;
  if (h.kind < static_cast<uint32_t>(ReportKind::kStart) || h.kind > static_cast<uint32_t>(last))
    return DataLossError("training rank " + std::to_string(w) + " sent a report of kind " +
                         std::to_string(h.kind));
  v.last.kind = static_cast<ReportKind>(h.kind);
  v.last.rank = h.rank;
  v.last.step = h.step;
  v.last.start_step = h.start_step;
  v.last.examples = h.examples;
  v.last.epoch = h.epoch;
  v.last.position.assign(reinterpret_cast<const char*>(m->payload.data()) + sizeof h,
                         m->payload.size() - sizeof h);
  // The lead's own final report is its position; its end comes after its checkpoint.
  v.final = v.last.kind == (tag == kLeadReportTag ? ReportKind::kEnd : ReportKind::kFinal);
  return true;
}

Status WorkerReports::AwaitEnd(int lead) {
  View& v = views_[static_cast<size_t>(lead)];
  while (!v.final) {
    // A lost lead is an error here (the caller looks for its successor), and so is silence: the
    // caller may wait again, so `v` takes only what was read.
    View next = v;
    REEL_ASSIGN_OR_RETURN(bool read,
                          ReadOne(lead, next, DeadlineIn(timeout_), true, kLeadReportTag));
    if (!read) return next.lost_status;
    v = std::move(next);
  }
  return Status::Ok();
}

Status WorkerReports::LoseLead(int lead, int world_rank, const std::string& why) {
  View& v = views_[static_cast<size_t>(lead)];
  while (v.lost.empty()) {
    // An expired deadline still takes a report that has arrived.
    REEL_ASSIGN_OR_RETURN(bool read, ReadOne(lead, v, DeadlineIn(std::chrono::milliseconds(0)),
                                             true, kLeadReportTag));
    if (!read) break;
  }
  v.lost = why;
  v.final = false;
  if (v.last.rank < 0) v.last.rank = world_rank;
  return Status::Ok();
}

void WorkerReports::TellOthers(const WorkerReport& report) {
  for (int w = 0; w < group_.size(); ++w)
    if (w != group_.rank() && views_[static_cast<size_t>(w)].lost.empty())
      (void)SendWorkerReport(group_, w, kLeadReportTag, report, timeout_);
}

Status WorkerReports::CatchUp(int64_t step) {
  for (int w = 0; w < group_.size(); ++w) {
    if (w == group_.rank()) continue;
    View& v = views_[static_cast<size_t>(w)];
    while (v.lost.empty() && !v.final && (v.last.rank < 0 || v.last.step < step)) {
      REEL_ASSIGN_OR_RETURN(bool read, ReadOne(w, v, DeadlineIn(timeout_), true));
      if (!read) break;
    }
  }
  return Status::Ok();
}

Status WorkerReports::Poll() {
  for (int w = 0; w < group_.size(); ++w) {
    if (w == group_.rank()) continue;
    View& v = views_[static_cast<size_t>(w)];
    while (v.lost.empty() && !v.final) {
      // An expired deadline still takes a report that has arrived.
      REEL_ASSIGN_OR_RETURN(bool read,
                            ReadOne(w, v, DeadlineIn(std::chrono::milliseconds(0)), false));
      if (!read) break;
    }
  }
  return Status::Ok();
}

template <typename T>
std::vector<T> WorkerReports::Newest(const T& mine, T WorkerReport::*field) const {
  std::vector<T> out;
  for (size_t w = 0; w < views_.size(); ++w)
    out.push_back(static_cast<int>(w) == group_.rank() ? mine : views_[w].last.*field);
  return out;
}

std::vector<std::string> WorkerReports::Positions(const std::string& lead_position) const {
  return Newest(lead_position, &WorkerReport::position);
}
std::vector<int64_t> WorkerReports::Epochs(int64_t lead_epoch) const {
  return Newest(lead_epoch, &WorkerReport::epoch);
}
std::vector<int64_t> WorkerReports::Steps(int64_t lead_step) const {
  return Newest(lead_step, &WorkerReport::step);
}

int64_t WorkerReports::Examples() const {
  int64_t n = 0;
  for (size_t w = 0; w < views_.size(); ++w)
    if (static_cast<int>(w) != group_.rank()) n += views_[w].last.examples;
  return n;
}

std::vector<LostRank> WorkerReports::Lost(int64_t budget_steps,
                                          const std::map<int, AppliedWork>& applied) const {
  std::vector<LostRank> out;
  for (size_t w = 0; w < views_.size(); ++w) {
    const View& v = views_[w];
    if (v.lost.empty() || static_cast<int>(w) == group_.rank()) continue;
    LostRank l;
    l.rank = v.last.rank;
    l.group_rank = static_cast<int>(w);
    l.last_step = v.last.step;
    l.position = v.last.position;
    l.why = v.lost;
    // Counted from what reached the parameters if the optimizer could tell (updates the rank
    // sent after its last report count, those it computed but never delivered do not), else
    // from its last report; at its own mean batch, from the same source.
    int64_t done = v.last.step, trained = v.last.step - v.last.start_step,
            examples = v.last.examples;
    const auto a = l.rank >= 0 ? applied.find(l.rank) : applied.end();
    if (a != applied.end()) {
      l.applied_step = done = a->second.updates > 0 ? a->second.step : v.last.start_step;
      l.applied_updates = a->second.updates;
      if (a->second.examples > 0) {
        trained = a->second.steps;
        examples = a->second.examples;
      }
    }
    if (budget_steps > 0) {
      l.steps_not_trained = std::max<int64_t>(0, budget_steps - done);
      if (examples > 0 && trained > 0)
        l.examples_not_trained = l.steps_not_trained * examples / trained;
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace reel::core

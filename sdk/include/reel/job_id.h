// The identity of one launch of a job, which every rank of it carries, so that a transport can
// refuse a process of another launch that happens to share its secret and coordinator's port (a
// coordinator left from an earlier run, a stray rank): plugins/tcp/README.md, "Jobs".
//
// Where it comes from, first found wins:
//   REEL_JOB_ID                  set by the user, or by `reel launch` for its ranks;
//   SLURM_JOB_ID.SLURM_STEP_ID   under srun (SLURM_JOBID, SLURM_STEPID: older names), or
//   SLURM_JOB_ID                 alone in a batch script;
//   ""                           none: ranks started by hand, which then check no job identity.
// An identity is 1 to kMaxJobIdBytes printable characters without spaces. `reel launch
// --max-restarts` gives each attempt of a launch its own (JobIdOfAttempt), so a process of an
// earlier attempt is refused as one of another launch, and a rank of a later attempt that finds
// an earlier attempt's coordinator waits for its own instead of failing (IsEarlierAttempt).
//
// Thread-safety: only reads the environment through `getenv`.
#ifndef REEL_JOB_ID_H_
#define REEL_JOB_ID_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "reel/status.h"

namespace reel {

// The longest job identity, in bytes (the handshake carries it in a field of this size).
constexpr size_t kMaxJobIdBytes = 64;

// InvalidArgument naming `what` unless `id` is empty or a valid identity (see above).
inline Status CheckJobId(std::string_view id, std::string_view what) {
  if (id.size() <= kMaxJobIdBytes &&
      std::none_of(id.begin(), id.end(), [](char c) { return c <= ' ' || c > '~'; }))
    return Status::Ok();
  return InvalidArgumentError(std::string(what) + "=\"" + std::string(id) +
                              "\" is not a job identity: 1 to " + std::to_string(kMaxJobIdBytes) +
                              " printable characters without spaces");
}

// The job identity from the environment (see above); "" when none is set. InvalidArgument naming
// the variable for a malformed one. `getenv` returns null for an unset variable.
inline Result<std::string> JobIdFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  auto set = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names)
      if (const char* v = getenv(name); v != nullptr && *v != '\0') return v;
    return "";
  };
  if (std::string id = set({"REEL_JOB_ID"}); !id.empty()) {
    REEL_RETURN_IF_ERROR(CheckJobId(id, "REEL_JOB_ID"));
    return id;
  }
  const std::string job = set({"SLURM_JOB_ID", "SLURM_JOBID"});
  if (job.empty()) return std::string();
  const std::string step = set({"SLURM_STEP_ID", "SLURM_STEPID"});
  const std::string id = step.empty() ? job : job + "." + step;
  REEL_RETURN_IF_ERROR(CheckJobId(id, "SLURM_JOB_ID.SLURM_STEP_ID"));
  return id;
}

// The job identity of attempt `restart` (0: the first) of a launch whose identity is `job_id`:
// `job_id` itself for the first, "JOB.restart-K" for restart K.
inline std::string JobIdOfAttempt(std::string_view job_id, int64_t restart) {
  std::string id(job_id);
  if (restart > 0) id += ".restart-" + std::to_string(restart);
  return id;
}

namespace job_id_internal {
// An identity split into the launch's and the attempt (JobIdOfAttempt); {id, 0} without a suffix.
inline std::pair<std::string_view, int64_t> SplitAttempt(std::string_view id) {
  constexpr std::string_view kSuffix = ".restart-";
  const size_t at = id.rfind(kSuffix);
  if (at == std::string_view::npos) return {id, 0};
  const std::string_view digits = id.substr(at + kSuffix.size());
  if (digits.empty() || digits.size() > 9 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {id, 0};
  int64_t restart = 0;
  for (char c : digits) restart = restart * 10 + (c - '0');
  return {id.substr(0, at), restart};
}
}  // namespace job_id_internal

// True when `theirs` is the identity of an earlier attempt of the launch that `mine` is a later
// attempt of (JobIdOfAttempt).
inline bool IsEarlierAttempt(std::string_view theirs, std::string_view mine) {
  const auto [their_job, their_restart] = job_id_internal::SplitAttempt(theirs);
  const auto [my_job, my_restart] = job_id_internal::SplitAttempt(mine);
  return their_job == my_job && their_restart < my_restart;
}

}  // namespace reel

#endif  // REEL_JOB_ID_H_

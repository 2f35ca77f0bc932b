// The conformance checks' plumbing, shared by the file of each kind (see
// reel/core/conformance.h): reporting a check, and the entry point of each kind.
#ifndef REEL_CORE_SRC_CONFORMANCE_CHECKS_H_
#define REEL_CORE_SRC_CONFORMANCE_CHECKS_H_

#include <string>

#include "reel/core/conformance.h"

namespace reel::core::conformance_internal {

// Reports `status` under `name`; true when it passed.
inline bool Report(const CheckSink& sink, std::string name, Status status) {
  const bool ok = status.ok();
  sink({std::move(name), std::move(status), false});
  return ok;
}
inline void Skip(const CheckSink& sink, std::string name, std::string why) {
  sink({std::move(name), FailedPreconditionError(std::move(why)), true});
}
// "expected CODE, got STATUS" unless `s` has `code`.
inline Status ExpectCode(const Status& s, StatusCode code, const std::string& what) {
  if (s.code() == code) return Status::Ok();
  return InternalError(what + ": expected " + std::string(StatusCodeName(code)) + ", got " +
                       s.ToString());
}

void CheckStorage(const Registry& registry, const ComponentEntry& entry,
                  const ConformanceOptions& options, const CheckSink& sink);
void CheckDataSource(const Registry& registry, const ComponentEntry& entry,
                     const ConformanceOptions& options, StorageResolver& storage,
                     const CheckSink& sink);
void CheckModel(const Registry& registry, const ComponentEntry& entry,
                const ConformanceOptions& options, const CheckSink& sink);
void CheckOptimizer(const Registry& registry, const ComponentEntry& entry,
                    const ConformanceOptions& options, const CheckSink& sink);
void CheckCommand(const Registry& registry, const ComponentEntry& entry, StorageResolver& storage,
                  const CheckSink& sink);

}  // namespace reel::core::conformance_internal

#endif  // REEL_CORE_SRC_CONFORMANCE_CHECKS_H_

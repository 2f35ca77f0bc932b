// The journal of a search: every trial's start and end, one JSON object per line (TrialRecord in
// proto/tune.proto, protobuf's JSON mapping), appended and flushed as they happen, so a crash or
// Ctrl-C loses nothing that had finished. Read back by `reel tune --resume`.
//
// Thread-safety: Append from several threads is safe (one lock); Read is a free function.
#ifndef REEL_CORE_SRC_TUNE_JOURNAL_H_
#define REEL_CORE_SRC_TUNE_JOURNAL_H_

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "reel/status.h"
#include "tune.pb.h"

namespace reel::core::tune {

class Journal {
 public:
  // Opens `path` for appending (created if missing).
  static Result<std::unique_ptr<Journal>> Open(const std::string& path);
  ~Journal();
  Status Append(const config::TrialRecord& record);
  const std::string& path() const { return path_; }

 private:
  Journal() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  std::mutex mu_;
};

// Every record of the journal at `path`, in order; an empty list when there is none. A last line
// cut short by a crash is skipped; any other line that does not parse is DataLoss naming the line.
Result<std::vector<config::TrialRecord>> ReadJournal(const std::string& path);

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_JOURNAL_H_

// The trainer's outputs besides checkpoints: the JSON-lines metrics log and TensorBoard event
// files. Both append as training goes. Local paths (and file:// URIs) are appended to and flushed
// in place, so `tail -f` and TensorBoard see progress live; other storages (s3://) have no append,
// so there the whole object is rewritten through Storage::OpenWrite at every Flush().
//
// Thread-safety: one thread (rank 0's trainer) per object.
#ifndef REEL_CORE_SRC_TRAIN_RUN_LOG_H_
#define REEL_CORE_SRC_TRAIN_RUN_LOG_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reel/status.h"
#include "reel/storage.h"

namespace reel::core {

// An append-only object.
class AppendSink {
 public:
  // `truncate`: start empty instead of appending to what is there.
  static Result<std::unique_ptr<AppendSink>> Open(StorageResolver& storage, const std::string& uri,
                                                  bool truncate);
  ~AppendSink();
  Status Append(std::string_view bytes);
  Status Flush();
  const std::string& uri() const { return uri_; }

 private:
  AppendSink() = default;
  std::string uri_;
  std::FILE* file_ = nullptr;   // local files
  Storage* storage_ = nullptr;  // otherwise: the whole content, rewritten at Flush()
  std::string content_;
  bool dirty_ = false;
};

// One JSON object per line; values are numbers.
class MetricsLog {
 public:
  explicit MetricsLog(std::unique_ptr<AppendSink> sink) : sink_(std::move(sink)) {}
  Status Write(const std::vector<std::pair<std::string, double>>& fields);
  Status Flush() { return sink_->Flush(); }

 private:
  std::unique_ptr<AppendSink> sink_;
};

// A TensorBoard event file: TFRecord framing (masked CRC32C) around Event protos.
class EventWriter {
 public:
  // Creates `dir`/events.out.tfevents.<seconds>.<host> and writes the file_version event.
  static Result<std::unique_ptr<EventWriter>> Create(StorageResolver& storage,
                                                     const std::string& dir);
  // One Event at `step` holding a scalar summary per (tag, value).
  Status WriteScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  Status Flush() { return sink_->Flush(); }
  const std::string& uri() const { return sink_->uri(); }

 private:
  explicit EventWriter(std::unique_ptr<AppendSink> sink) : sink_(std::move(sink)) {}
  Status WriteRecord(const std::string& data);
  std::unique_ptr<AppendSink> sink_;
};

// "a/b" + "c" → "a/b/c".
std::string JoinPath(std::string_view dir, std::string_view name);
// Seconds since the Unix epoch.
double WallTime();

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_RUN_LOG_H_

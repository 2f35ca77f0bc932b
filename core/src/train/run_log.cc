// Metrics log and TensorBoard event files (see run_log.h).
#include "train/run_log.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "event.pb.h"
#include "host_name.h"
#include "reel/recordio.h"

namespace reel::core {
namespace {

// The local path of a file URI, or empty if the URI is not local.
std::string LocalPath(const std::string& uri) {
  if (UriScheme(uri) != "file") return "";
  if (uri.rfind("file://", 0) == 0) return uri.substr(7);
  return uri;
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);  // wall_time needs ~13 digits for ms
  return buf;
}

}  // namespace

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (!out.empty()) out += '/';
  return out + std::string(name);
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<std::unique_ptr<AppendSink>> AppendSink::Open(StorageResolver& storage,
                                                     const std::string& uri, bool truncate) {
  std::unique_ptr<AppendSink> sink(new AppendSink());
  sink->uri_ = uri;
  if (std::string path = LocalPath(uri); !path.empty()) {
    std::error_code ec;
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    sink->file_ = std::fopen(path.c_str(), truncate ? "wb" : "ab");
    if (sink->file_ == nullptr)
      return NotFoundError(uri + ": cannot open for writing: " + std::strerror(errno));
    return sink;
  }
  REEL_ASSIGN_OR_RETURN(sink->storage_, storage.ForUri(uri));
  if (!truncate) {
    auto existing = ReadAll(*sink->storage_, uri);
    if (existing.ok()) sink->content_ = std::move(*existing);
  }
  return sink;
}

AppendSink::~AppendSink() {
  if (file_)
    std::fclose(file_);
  else if (dirty_)
    Flush().ok();
}

Status AppendSink::Append(std::string_view bytes) {
  if (file_) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
      return UnavailableError(uri_ + ": write failed: " + std::strerror(errno));
    return Status::Ok();
  }
  content_.append(bytes);
  dirty_ = true;
  return Status::Ok();
}

Status AppendSink::Flush() {
  if (file_) {
    if (std::fflush(file_) != 0) return UnavailableError(uri_ + ": flush failed");
    return Status::Ok();
  }
  if (!dirty_) return Status::Ok();
  dirty_ = false;
  return WriteAll(*storage_, uri_, content_).WithContext("writing " + uri_);
}

Status MetricsLog::Write(const std::vector<std::pair<std::string, double>>& fields) {
  std::string line = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ", ";
    line += "\"" + fields[i].first + "\": " + JsonNumber(fields[i].second);
  }
  line += "}\n";
  return sink_->Append(line);
}

Result<std::unique_ptr<EventWriter>> EventWriter::Create(StorageResolver& storage,
                                                         const std::string& dir) {
  const double now = WallTime();
  std::string name = "events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." +
                     HostName() + ".reel";
  REEL_ASSIGN_OR_RETURN(Storage * s, storage.ForUri(dir));
  REEL_RETURN_IF_ERROR(s->CreateDir(dir));
  REEL_ASSIGN_OR_RETURN(auto sink, AppendSink::Open(storage, JoinPath(dir, name), true));
  std::unique_ptr<EventWriter> w(new EventWriter(std::move(sink)));
  reel::tensorboard::Event e;
  e.set_wall_time(now);
  e.set_file_version("brain.Event:2");
  REEL_RETURN_IF_ERROR(w->WriteRecord(e.SerializeAsString()));
  REEL_RETURN_IF_ERROR(w->Flush());
  return w;
}

Status EventWriter::WriteScalars(int64_t step,
                                 const std::vector<std::pair<std::string, double>>& scalars) {
  reel::tensorboard::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  for (const auto& [tag, value] : scalars) {
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return WriteRecord(e.SerializeAsString());
}

Status EventWriter::WriteRecord(const std::string& data) {
  std::string rec;
  recordio::AppendFramedRecord(data, &rec);
  return sink_->Append(rec);
}

}  // namespace reel::core

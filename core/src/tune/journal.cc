#include "journal.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace reel::core::tune {

namespace pbj = google::protobuf::util;

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& path) {
  std::unique_ptr<Journal> j(new Journal());
  j->path_ = path;
  j->file_ = std::fopen(path.c_str(), "ab");
  if (j->file_ == nullptr) return UnavailableError("journal " + path + ": " + std::strerror(errno));
  return j;
}

Journal::~Journal() {
  if (file_) std::fclose(file_);
}

Status Journal::Append(const config::TrialRecord& record) {
  std::string line;
  pbj::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;  // STARTED and config 0 are defaults, yet must show
  if (!pbj::MessageToJsonString(record, &line, opts).ok())
    return InternalError("journal " + path_ + ": cannot encode a record");
  line += '\n';
  std::lock_guard<std::mutex> lock(mu_);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    return UnavailableError("journal " + path_ + ": write failed: " + std::strerror(errno));
  ::fsync(::fileno(file_));  // a finished trial must survive a power cut as well as a crash
  return Status::Ok();
}

Result<std::vector<config::TrialRecord>> ReadJournal(const std::string& path) {
  std::vector<config::TrialRecord> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  int line_no = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    const bool last_unterminated = end == std::string::npos;
    std::string line = content.substr(start, last_unterminated ? std::string::npos : end - start);
    start = last_unterminated ? content.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    config::TrialRecord r;
    pbj::JsonParseOptions opts;
    auto s = pbj::JsonStringToMessage(line, &r, opts);
    if (!s.ok()) {
      if (last_unterminated) break;  // the write a crash cut short
      return DataLossError("journal " + path + ":" + std::to_string(line_no) +
                           ": not a trial record (" + std::string(s.message()) + ")");
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace reel::core::tune

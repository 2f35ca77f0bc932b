// In-memory commits (see commits.h).
#include "train/commits.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "reel/core/checkpoint.h"
#include "reel/job_id.h"

namespace reel::core {
namespace {

constexpr std::string_view kTemporary = ".tmp";

std::string Hex(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 15];
  return out;
}

// FNV-1a, 64 bits: a stable name for a directory, not a guard against anyone.
uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

Status WriteAll(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return InternalError("commit: cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return InternalError("commit: cannot write " + path + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    return InternalError("commit: cannot close " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

std::string CommitPrefix(std::string_view job_id, std::string_view checkpoint_dir) {
  std::string job(job_id_internal::SplitAttempt(job_id).first);
  if (job.empty()) job = "nojob";
  for (char& c : job)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return "reel-commit." + job + "." + Hex(Fnv1a(checkpoint_dir)) + ".";
}

Status CommitStore::Write(std::string_view bytes) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return InternalError("commit: cannot create directory " + dir_ + ": " + ec.message());
  const std::string path = MyPath(), tmp = path + std::string(kTemporary);
  Status s = WriteAll(tmp, bytes);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = InternalError("commit: cannot rename " + tmp + ": " + std::strerror(errno));
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

std::vector<std::string> CommitStore::List(bool with_temporary) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix_, 0) != 0) continue;
    const bool temporary =
        name.size() >= kTemporary.size() &&
        name.compare(name.size() - kTemporary.size(), kTemporary.size(), kTemporary) == 0;
    if (!temporary || with_temporary) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

CommitStore::Newest CommitStore::FindNewest() const {
  Newest newest;
  for (const std::string& path : List(/*with_temporary=*/false)) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      newest.refused.push_back(path + ": cannot be read");
      continue;
    }
    Result<CheckpointState> state = DecodeCheckpoint(bytes, path);
    if (!state.ok()) {
      newest.refused.push_back(state.status().ToString());
      continue;
    }
    if (state->step > newest.step) {
      newest.step = state->step;
      newest.path = path;
      newest.bytes = std::move(bytes);
    }
  }
  return newest;
}

void CommitStore::RemoveAll() const {
  for (const std::string& path : List(/*with_temporary=*/true)) ::unlink(path.c_str());
}

ResumeChoice ChooseNewest(int64_t disk_step, std::span<const int64_t> commit_steps) {
  ResumeChoice c;
  if (disk_step >= 0) {
    c.source = ResumeChoice::Source::kDisk;
    c.step = disk_step;
  }
  for (size_t r = 0; r < commit_steps.size(); ++r) {
    if (commit_steps[r] > c.step) {
      c.source = ResumeChoice::Source::kCommit;
      c.holder = static_cast<int>(r);
      c.step = commit_steps[r];
    }
  }
  return c;
}

}  // namespace reel::core

// The built-in "file" storage: local files named by plain paths or file:// URIs.
//
// Writes go to a temporary file beside the target, are flushed to disk and renamed into place on
// Close(), so readers see either the old object or the whole new one, never a half-written file.
// A temporary file is named `<target>.tmp-<host>-<pid>-<n>`; one that a killed process left
// behind is removed when its target is written again from the same host (a resume rewrites the
// checkpoint whose write was killed).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/filesystem.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "builtins.h"
#include "host_name.h"
#include "reel/glob.h"
#include "reel/storage.h"

namespace reel::core {
namespace {

namespace fs = boost::filesystem;

constexpr std::string_view kFilePrefix = "file://";

// The local path of a plain path or file:// URI.
std::string ToPath(std::string_view uri) {
  if (uri.substr(0, kFilePrefix.size()) == kFilePrefix) uri.remove_prefix(kFilePrefix.size());
  return std::string(uri);
}

Status ErrnoError(const std::string& what, const std::string& path, int err) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) return NotFoundError(msg);
  if (err == EACCES || err == EPERM) return PermissionDeniedError(msg);
  return UnavailableError(msg);
}

// The temporary-name prefix of `path`'s writes from this host: `<path>.tmp-<host>-`.
std::string TempPrefix(const std::string& path) { return path + ".tmp-" + HostName() + "-"; }

// Removes the temporary files of `path` that processes of this host left behind when they died
// (their pid is gone). A live writer's, another host's, or one that cannot be parsed stay. Best
// effort: the write that follows does not depend on it.
void RemoveDeadWritersTemps(const std::string& path) {
  const fs::path target(path);
  const std::string prefix = TempPrefix(target.filename().string());
  boost::system::error_code ec;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());  // <pid>-<n>
    int pid = 0;
    auto [next, err] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (err != std::errc() || next == rest.data() + rest.size() || *next != '-' || pid <= 0 ||
        pid == ::getpid())
      continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
  }
}

class LocalFile final : public RandomAccessFile {
 public:
  LocalFile(std::string uri, int fd) : uri_(std::move(uri)), fd_(fd) {}
  ~LocalFile() override { ::close(fd_); }
  const std::string& uri() const override { return uri_; }

  Result<uint64_t> Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoError("stat", uri_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n =
          ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("read at offset " + std::to_string(offset + done), uri_, errno);
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

 private:
  std::string uri_;
  int fd_;
};

class LocalWritableFile final : public WritableFile {
 public:
  LocalWritableFile(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  ~LocalWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }

  Status Append(std::span<const std::byte> data) override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": append after close");
    const std::byte* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("write", path_, errno);
      p += n;
      left -= static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": closed twice");
    int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError("flush", path_, err);
    }
    if (::close(fd) != 0) return ErrnoError("close", path_, errno);
    if (::rename(temp_.c_str(), path_.c_str()) != 0)
      return ErrnoError("rename into place", path_, errno);
    committed_ = true;
    // Make the rename itself durable.
    std::string dir = fs::path(path_).parent_path().string();
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Status::Ok();
  }

 private:
  std::string path_, temp_;
  int fd_;
  bool committed_ = false;
};

class FileStorage final : public Storage {
 public:
  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) override {
    const bool file_uri = pattern.substr(0, kFilePrefix.size()) == kFilePrefix;
    const std::string path = ToPath(pattern);
    std::vector<std::string> matches;
    if (!HasGlob(path)) {
      matches.push_back(path);
    } else {
      // Expand one '/'-separated segment at a time, starting from the deepest wildcard-free dir.
      std::vector<std::string> segments;
      size_t start = 0;
      while (start <= path.size()) {
        size_t slash = path.find('/', start);
        if (slash == std::string::npos) slash = path.size();
        segments.push_back(path.substr(start, slash - start));
        start = slash + 1;
      }
      std::vector<std::string> bases{""};
      for (size_t i = 0; i < segments.size(); ++i) {
        std::vector<std::string> next;
        const std::string& seg = segments[i];
        for (const std::string& base : bases) {
          std::string prefix = i == 0 ? "" : base + "/";
          if (!HasGlob(seg)) {
            next.push_back(prefix + seg);
            continue;
          }
          std::string dir = i == 0 ? "." : (base.empty() ? "/" : base);
          boost::system::error_code ec;
          if (!fs::is_directory(dir, ec)) continue;
          for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            std::string name = it->path().filename().string();
            if (GlobMatch(seg, name) && (name[0] != '.' || seg[0] == '.'))
              next.push_back(prefix + name);
          }
          if (ec) return ErrnoError("list directory", dir, ec.value());
        }
        bases = std::move(next);
      }
      matches = std::move(bases);
    }
    std::vector<ObjectInfo> out;
    for (const std::string& m : matches) {
      struct stat st;
      if (::stat(m.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.push_back(
          {file_uri ? std::string(kFilePrefix) + m : m, static_cast<uint64_t>(st.st_size)});
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.uri < b.uri; });
    return out;
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) override {
    std::string path = ToPath(uri);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open", std::string(uri), errno);
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return InvalidArgumentError(std::string(uri) + ": is a directory");
    }
    return std::unique_ptr<RandomAccessFile>(new LocalFile(std::string(uri), fd));
  }

  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    std::string path = ToPath(uri);
    fs::path parent = fs::path(path).parent_path();
    boost::system::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) return ErrnoError("create directory", parent.string(), ec.value());
    RemoveDeadWritersTemps(path);
    static std::atomic<uint64_t> counter{0};
    std::string temp =
        TempPrefix(path) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("create", temp, errno);
    return std::unique_ptr<WritableFile>(new LocalWritableFile(path, temp, fd));
  }

  Status Delete(std::string_view uri) override {
    std::string path = ToPath(uri);
    if (::unlink(path.c_str()) != 0) return ErrnoError("delete", std::string(uri), errno);
    return Status::Ok();
  }

  Status CreateDir(std::string_view uri) override {
    boost::system::error_code ec;
    fs::create_directories(ToPath(uri), ec);
    if (ec) return ErrnoError("create directory", std::string(uri), ec.value());
    return Status::Ok();
  }
};

}  // namespace

Status RegisterFileStorage(Registrar& registrar) {
  return registrar.Add<Storage>(
      {"file", "local files: plain paths and file:// URIs, with glob patterns", {}},
      [](const Options&) -> Result<std::unique_ptr<Storage>> {
        return std::unique_ptr<Storage>(new FileStorage());
      });
}

}  // namespace reel::core

// A local-filesystem Storage and a resolver over it: a test double for the tfrecord plugin's
// tests and benchmark (the plugin itself never includes this; the host provides real storage).
// Paths are plain paths; Glob supports wildcards in the last path segment only.
//
// Thread-safety: as Storage (stateless apart from the file descriptors of open files).
#ifndef REEL_PLUGINS_TFRECORD_TESTS_LOCAL_STORAGE_H_
#define REEL_PLUGINS_TFRECORD_TESTS_LOCAL_STORAGE_H_

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "reel/glob.h"
#include "reel/storage.h"

namespace reel::testing {

inline Status ErrnoStatus(const std::string& what, const std::string& path) {
  int e = errno;
  std::string m = path + ": " + what + ": " + std::strerror(e);
  return e == ENOENT ? NotFoundError(m) : InternalError(m);
}

class LocalReadFile : public RandomAccessFile {
 public:
  LocalReadFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~LocalReadFile() override { ::close(fd_); }
  const std::string& uri() const override { return path_; }
  Result<uint64_t> Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoStatus("fstat", path_);
    return static_cast<uint64_t>(st.st_size);
  }
  Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t r =
          ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ErrnoStatus("pread", path_);
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  std::string path_;
  int fd_;
};

class LocalWriteFile : public WritableFile {
 public:
  LocalWriteFile(std::string path, std::string tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  ~LocalWriteFile() override {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  Status Append(std::span<const std::byte> data) override {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t r = ::write(fd_, data.data() + done, data.size() - done);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ErrnoStatus("write", tmp_);
      done += static_cast<size_t>(r);
    }
    return Status::Ok();
  }
  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus("close", tmp_);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) return ErrnoStatus("rename", path_);
    return Status::Ok();
  }

 private:
  std::string path_, tmp_;
  int fd_;
};

class LocalStorage : public Storage {
 public:
  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern_view) override {
    std::string pattern(pattern_view);
    std::vector<ObjectInfo> out;
    struct stat st;
    if (!HasGlob(pattern)) {
      if (::stat(pattern.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        out.push_back({pattern, static_cast<uint64_t>(st.st_size)});
      return out;
    }
    size_t slash = pattern.rfind('/');
    std::string dir = slash == std::string::npos ? "." : pattern.substr(0, slash);
    std::string base = slash == std::string::npos ? pattern : pattern.substr(slash + 1);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("opendir", dir);
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || !GlobMatch(base, name)) continue;
      std::string path = slash == std::string::npos ? name : dir + "/" + name;
      if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        out.push_back({path, static_cast<uint64_t>(st.st_size)});
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.uri < b.uri; });
    return out;
  }
  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) override {
    std::string path(uri);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path);
    return std::unique_ptr<RandomAccessFile>(new LocalReadFile(path, fd));
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    std::string path(uri);
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("open", tmp);
    return std::unique_ptr<WritableFile>(new LocalWriteFile(path, tmp, fd));
  }
  Status Delete(std::string_view uri) override {
    std::string path(uri);
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("unlink", path);
    return Status::Ok();
  }
  Status CreateDir(std::string_view uri) override {
    std::string path(uri);
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", path);
    return Status::Ok();
  }
};

class LocalResolver : public StorageResolver {
 public:
  Result<Storage*> ForUri(std::string_view uri) override {
    if (UriScheme(uri) != "file") return NotFoundError("no storage for '" + std::string(uri) + "'");
    return &storage_;
  }
  LocalStorage& storage() { return storage_; }

 private:
  LocalStorage storage_;
};

}  // namespace reel::testing

#endif  // REEL_PLUGINS_TFRECORD_TESTS_LOCAL_STORAGE_H_

// Storage: where bytes live. Local files ("file://", plain paths), S3 ("s3://bucket/key"), or any
// scheme a plugin registers. Data sources, checkpoints and metrics reach storage only through
// this interface, so a run reads s3://bucket/train*.tfrecord exactly as it reads local files.
//
// A Storage is registered under its URI scheme ("file", "s3"); hosts pick one per URI through a
// StorageResolver. Thread-safety: Storage methods may be called from several threads at once;
// a RandomAccessFile's Read() may be called concurrently; a WritableFile is single-threaded.
#ifndef REEL_STORAGE_H_
#define REEL_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"

namespace reel {

// One object a Glob found.
struct ObjectInfo {
  std::string uri;  // full URI (or path, as the user wrote it) of the object
  uint64_t size = 0;
};

// An object opened for reading at any offset; Read() may be called from several threads at once.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual const std::string& uri() const = 0;
  virtual Result<uint64_t> Size() = 0;
  // Reads up to out.size() bytes at `offset` into `out`; returns how many were read. Fewer than
  // requested only at the end of the object (0 at or past the end). Errors name the URI.
  virtual Result<size_t> Read(uint64_t offset, std::span<std::byte> out) = 0;
};

// Bytes written to a WritableFile become visible only when Close() succeeds, all at once, under
// the final name (a temporary name + rename for files, a completed upload for S3). Destroying it
// without a successful Close() discards everything: a crash never leaves half an object.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::span<const std::byte> data) = 0;
  virtual Status Close() = 0;
};

// Objects under one URI scheme ("file", "s3", ...), built by a StorageFactory; the host keeps
// one per scheme and hands it out through its StorageResolver.
class Storage {
 public:
  virtual ~Storage() = default;

  // Objects whose URI matches `pattern`: a URI or path where '*', '?' and '[...]' glob within one
  // path segment ('/' never matches a wildcard). Sorted by URI. No match is an empty list, not an
  // error; a bad location (missing bucket, unreadable directory) is.
  virtual Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) = 0;
  virtual Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) = 0;
  // Removes an object; NotFound if it does not exist.
  virtual Status Delete(std::string_view uri) = 0;
  // Optional: make a "directory" (no-op where keys have no directories).
  virtual Status CreateDir(std::string_view /*uri*/) { return Status::Ok(); }
};

// Finds the Storage for a URI by its scheme (no scheme means a local path). Implemented by the
// host; plugins receive one in their context. The returned storage lives as long as the resolver.
class StorageResolver {
 public:
  virtual ~StorageResolver() = default;
  virtual Result<Storage*> ForUri(std::string_view uri) = 0;
};

// "s3" for "s3://b/k", "file" for "file:///x" and for plain paths.
inline std::string_view UriScheme(std::string_view uri) {
  size_t pos = uri.find("://");
  if (pos == std::string_view::npos || pos == 0) return "file";
  return uri.substr(0, pos);
}

// Whole-object helpers on top of the interface.
inline Result<std::string> ReadAll(Storage& storage, std::string_view uri) {
  REEL_ASSIGN_OR_RETURN(auto file, storage.OpenRead(uri));
  REEL_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::string out(size, '\0');
  REEL_ASSIGN_OR_RETURN(size_t n, file->Read(0, std::as_writable_bytes(std::span<char>(out))));
  if (n != size)
    return DataLossError(std::string(uri) + ": short read (" + std::to_string(n) + " of " +
                         std::to_string(size) + " bytes)");
  return out;
}

// Writes `data` as the whole object `uri`, visible at once when this returns OK.
inline Status WriteAll(Storage& storage, std::string_view uri, std::string_view data) {
  REEL_ASSIGN_OR_RETURN(auto file, storage.OpenWrite(uri));
  REEL_RETURN_IF_ERROR(
      file->Append(std::as_bytes(std::span<const char>(data.data(), data.size()))));
  return file->Close();
}

}  // namespace reel

#endif  // REEL_STORAGE_H_

// FaultStorage: a Storage (and resolver) over another one that injects one fault into one write,
// for the fault-injection tests: the write (or several in a row) fails like a full disk, or the
// process is killed with SIGKILL at a chosen byte of the object, before its Close() or right after
// it. Reads, globs and deletes pass through. Header only, for *_test.cc.
//
// Thread-safety: as the wrapped storage; the write counter is atomic.
#ifndef REEL_CORE_SRC_TRAIN_FAULT_STORAGE_H_
#define REEL_CORE_SRC_TRAIN_FAULT_STORAGE_H_

#include <algorithm>
#include <atomic>
#include <csignal>
#include <memory>
#include <ostream>
#include <string>

#include "reel/storage.h"

namespace reel::core::testing {

struct WriteFault {
  enum class Kind {
    kNone,
    kFailAppend,       // Append() fails with "No space left on device"
    kKillAtByte,       // SIGKILL once `at_byte` bytes of the object are written (or at Close())
    kKillBeforeClose,  // SIGKILL when Close() is called: every byte written, nothing committed
    kKillAfterClose,   // SIGKILL right after a successful Close(): the object is complete
  };
  Kind kind = Kind::kNone;
  int nth = 1;  // the nth write whose URI contains `uri_contains`
  // kFailAppend: so many matching writes fail, from the nth on (a disk that stays full).
  int count = 1;
  std::string uri_contains = ".reelckpt";
  uint64_t at_byte = 0;
  std::string name;  // for test names
};
inline std::ostream& operator<<(std::ostream& os, const WriteFault& f) { return os << f.name; }

class FaultStorage : public Storage, public StorageResolver {
 public:
  // `inner` must outlive this storage.
  FaultStorage(StorageResolver& inner, WriteFault fault)
      : inner_(inner), fault_(std::move(fault)) {}

  Result<Storage*> ForUri(std::string_view) override { return static_cast<Storage*>(this); }
  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) override {
    REEL_ASSIGN_OR_RETURN(Storage * s, inner_.ForUri(pattern));
    return s->Glob(pattern);
  }
  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(Storage * s, inner_.ForUri(uri));
    return s->OpenRead(uri);
  }
  Status Delete(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(Storage * s, inner_.ForUri(uri));
    return s->Delete(uri);
  }
  Status CreateDir(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(Storage * s, inner_.ForUri(uri));
    return s->CreateDir(uri);
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    REEL_ASSIGN_OR_RETURN(Storage * s, inner_.ForUri(uri));
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, s->OpenWrite(uri));
    if (fault_.kind == WriteFault::Kind::kNone ||
        std::string_view(uri).find(fault_.uri_contains) == std::string_view::npos ||
        !Faulty(++matching_writes_))
      return file;
    return std::unique_ptr<WritableFile>(new FaultyFile(std::string(uri), std::move(file), fault_));
  }

 private:
  bool Faulty(int write) const {
    const int count = fault_.kind == WriteFault::Kind::kFailAppend ? fault_.count : 1;
    return write >= fault_.nth && write < fault_.nth + count;
  }

  class FaultyFile : public WritableFile {
   public:
    FaultyFile(std::string uri, std::unique_ptr<WritableFile> inner, WriteFault fault)
        : uri_(std::move(uri)), inner_(std::move(inner)), fault_(std::move(fault)) {}
    Status Append(std::span<const std::byte> data) override {
      using Kind = WriteFault::Kind;
      if (fault_.kind == Kind::kFailAppend)
        return UnavailableError(uri_ + ": write: No space left on device (injected)");
      if (fault_.kind == Kind::kKillAtByte && written_ + data.size() >= fault_.at_byte) {
        // The bytes before the kill point really reach the file, as a dying process's would.
        size_t part = static_cast<size_t>(fault_.at_byte - written_);
        (void)inner_->Append(data.first(part));
        std::raise(SIGKILL);
      }
      written_ += data.size();
      return inner_->Append(data);
    }
    Status Close() override {
      using Kind = WriteFault::Kind;
      if (fault_.kind == Kind::kKillAtByte || fault_.kind == Kind::kKillBeforeClose)
        std::raise(SIGKILL);
      Status s = inner_->Close();
      if (fault_.kind == Kind::kKillAfterClose) std::raise(SIGKILL);
      return s;
    }

   private:
    std::string uri_;
    std::unique_ptr<WritableFile> inner_;
    WriteFault fault_;
    uint64_t written_ = 0;
  };

  StorageResolver& inner_;
  WriteFault fault_;
  std::atomic<int> matching_writes_{0};
};

}  // namespace reel::core::testing

#endif  // REEL_CORE_SRC_TRAIN_FAULT_STORAGE_H_

// A storage plugin: objects in memory under mem:// URIs, shared by every user of one storage
// instance. Copy it and replace the map with your service's calls; the rules it follows are those
// of reel/storage.h:
//   - a written object appears only when Close() succeeds, all at once (here: the bytes are
//     buffered in the writer and moved into the map at Close); a writer destroyed unclosed leaves
//     nothing behind;
//   - Glob matches within one path segment (reel/glob.h does the matching) and sorts by URI;
//   - errors name the URI: NotFound for a missing object;
//   - methods may be called from several threads at once (a mutex guards the map).
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "reel/glob.h"
#include "reel/plugin.h"

namespace {

struct Objects {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const std::string>, std::less<>> by_uri;  // guarded by mu
};

class MemoryFile final : public reel::RandomAccessFile {
 public:
  MemoryFile(std::string uri, std::shared_ptr<const std::string> bytes)
      : uri_(std::move(uri)), bytes_(std::move(bytes)) {}
  const std::string& uri() const override { return uri_; }
  reel::Result<uint64_t> Size() override { return bytes_->size(); }
  reel::Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_->size()) return size_t{0};
    const size_t n = std::min<size_t>(out.size(), bytes_->size() - offset);
    std::memcpy(out.data(), bytes_->data() + offset, n);
    return n;
  }

 private:
  std::string uri_;
  std::shared_ptr<const std::string> bytes_;  // a snapshot: later writes do not change it
};

class MemoryWriter final : public reel::WritableFile {
 public:
  MemoryWriter(std::shared_ptr<Objects> objects, std::string uri)
      : objects_(std::move(objects)), uri_(std::move(uri)) {}
  reel::Status Append(std::span<const std::byte> data) override {
    if (closed_) return reel::FailedPreconditionError(uri_ + ": Append after Close");
    pending_.append(reinterpret_cast<const char*>(data.data()), data.size());
    return reel::Status::Ok();
  }
  reel::Status Close() override {
    if (closed_) return reel::FailedPreconditionError(uri_ + ": closed twice");
    closed_ = true;
    std::lock_guard<std::mutex> lock(objects_->mu);
    objects_->by_uri[uri_] = std::make_shared<const std::string>(std::move(pending_));
    return reel::Status::Ok();
  }

 private:
  std::shared_ptr<Objects> objects_;
  std::string uri_, pending_;
  bool closed_ = false;
};

class MemoryStorage final : public reel::Storage {
 public:
  reel::Result<std::vector<reel::ObjectInfo>> Glob(std::string_view pattern) override {
    std::vector<reel::ObjectInfo> out;
    std::lock_guard<std::mutex> lock(objects_->mu);
    for (const auto& [uri, bytes] : objects_->by_uri)  // a std::map: already sorted by URI
      if (reel::GlobMatch(pattern, uri)) out.push_back({uri, bytes->size()});
    return out;
  }
  reel::Result<std::unique_ptr<reel::RandomAccessFile>> OpenRead(std::string_view uri) override {
    std::lock_guard<std::mutex> lock(objects_->mu);
    auto it = objects_->by_uri.find(uri);
    if (it == objects_->by_uri.end())
      return reel::NotFoundError(std::string(uri) + ": no such object");
    return std::unique_ptr<reel::RandomAccessFile>(new MemoryFile(it->first, it->second));
  }
  reel::Result<std::unique_ptr<reel::WritableFile>> OpenWrite(std::string_view uri) override {
    return std::unique_ptr<reel::WritableFile>(new MemoryWriter(objects_, std::string(uri)));
  }
  reel::Status Delete(std::string_view uri) override {
    std::lock_guard<std::mutex> lock(objects_->mu);
    auto it = objects_->by_uri.find(uri);
    if (it == objects_->by_uri.end())
      return reel::NotFoundError(std::string(uri) + ": no such object");
    objects_->by_uri.erase(it);
    return reel::Status::Ok();
  }

 private:
  std::shared_ptr<Objects> objects_ = std::make_shared<Objects>();  // writers keep it alive
};

reel::Status Register(reel::Registrar& r) {
  // A storage is registered under the URI scheme it serves.
  return r.Add<reel::Storage>(
      {"mem", "objects in this process's memory (mem://...)", {}},
      [](const reel::Options&) -> reel::Result<std::unique_ptr<reel::Storage>> {
        return std::unique_ptr<reel::Storage>(new MemoryStorage());
      });
}

}  // namespace

REEL_PLUGIN("template_storage", "0.1.0", "Template storage plugin: copy me", Register)

// S3Reader: see s3_files.h for the read-ahead and parallel-range design.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "s3_files.h"

namespace reel::s3 {
namespace {

// One block of the object, filled by a background ranged GET.
struct Block {
  std::unique_ptr<std::byte[]> data;
  size_t size = 0;
  std::shared_future<Status> done;
};

// What background fetches need; shared with them so a fetch never touches a dead reader.
struct Shared {
  std::shared_ptr<S3Client> client;
  std::string bucket, key;
  std::string etag;   // as opened (HEAD); every ranged GET asks for this version
  uint64_t size = 0;  // as opened; set before any fetch starts, never changed

  // A ranged GET of `sink.size()` bytes at `begin`, of the version that was opened.
  S3Request RangeGet(uint64_t begin, std::span<std::byte> sink) const {
    S3Request req = MakeRequest("GET", bucket, key);
    req.range_begin = begin;
    req.sink = sink;
    req.if_match = etag;
    req.object_size = size;
    return req;
  }
  std::mutex mu;
  std::condition_variable idle_cv;
  int inflight = 0;  // background fetches still running
};

class S3Reader : public RandomAccessFile {
 public:
  S3Reader(std::shared_ptr<S3Client> client, std::string bucket, std::string key, uint64_t size,
           std::string etag)
      : shared_(std::make_shared<Shared>()),
        uri_(S3Client::Uri(bucket, key)),
        block_size_(static_cast<uint64_t>(client->config().read_ahead)),
        parallel_(client->config().parallel_ranges) {
    shared_->client = std::move(client);
    shared_->bucket = std::move(bucket);
    shared_->key = std::move(key);
    shared_->etag = std::move(etag);
    shared_->size = size;
  }

  // Waits for background fetches: they write into blocks this reader handed out.
  ~S3Reader() override {
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->idle_cv.wait(lock, [&] { return shared_->inflight == 0; });
  }

  const std::string& uri() const override { return uri_; }
  Result<uint64_t> Size() override { return shared_->size; }

  Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
    if (offset >= shared_->size || out.empty()) return size_t{0};
    size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), shared_->size - offset));
    if (n >= block_size_) return ReadDirect(offset, out.first(n));
    size_t done = 0;
    while (done < n) {
      uint64_t pos = offset + done;
      uint64_t idx = pos / block_size_;
      REEL_ASSIGN_OR_RETURN(std::shared_ptr<Block> b, GetBlock(idx));
      size_t in_block = static_cast<size_t>(pos - idx * block_size_);
      size_t take = std::min(n - done, b->size - in_block);
      std::memcpy(out.data() + done, b->data.get() + in_block, take);
      done += take;
    }
    return n;
  }

 private:
  uint64_t BlockCount() const { return (shared_->size + block_size_ - 1) / block_size_; }

  // Starts fetching block `idx` in the background unless it is cached or in flight.
  // REQUIRES: shared_->mu held.
  void StartFetchLocked(uint64_t idx) {
    if (idx >= BlockCount() || blocks_.count(idx)) return;
    auto block = std::make_shared<Block>();
    uint64_t begin = idx * block_size_;
    block->size = static_cast<size_t>(std::min(block_size_, shared_->size - begin));
    block->data = std::make_unique_for_overwrite<std::byte[]>(block->size);
    auto promise = std::make_shared<std::promise<Status>>();
    block->done = promise->get_future().share();
    blocks_[idx] = block;
    ++shared_->inflight;
    // A detached thread, not std::async: evicting a block must never wait for its fetch.
    std::thread([shared = shared_, block, begin, promise] {
      S3Request req = shared->RangeGet(begin, {block->data.get(), block->size});
      promise->set_value(shared->client->Execute(req).status());
      std::lock_guard<std::mutex> lock(shared->mu);
      if (--shared->inflight == 0) shared->idle_cv.notify_all();
    }).detach();
  }

  Result<std::shared_ptr<Block>> GetBlock(uint64_t idx) {
    std::shared_ptr<Block> b;
    std::vector<std::shared_ptr<Block>> evicted;  // released outside the lock
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      bool sequential = idx == 0 || idx == last_block_ || idx == last_block_ + 1;
      last_block_ = idx;
      StartFetchLocked(idx);
      // Read-ahead: keep `parallel_` blocks in flight in front of a forward scan.
      if (sequential)
        for (int64_t j = 1; j < parallel_; ++j) StartFetchLocked(idx + j);
      for (auto it = blocks_.begin(); it != blocks_.end();) {
        bool keep = it->first + 1 >= idx && it->first <= idx + static_cast<uint64_t>(parallel_);
        if (keep) {
          ++it;
        } else {
          evicted.push_back(std::move(it->second));
          it = blocks_.erase(it);
        }
      }
      b = blocks_[idx];
    }
    Status s = b->done.get();
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (auto it = blocks_.find(idx); it != blocks_.end() && it->second == b) blocks_.erase(it);
      return s;
    }
    return b;
  }

  // A large read: ranged GETs of one block each, up to `parallel_` at once, into `out`.
  Result<size_t> ReadDirect(uint64_t offset, std::span<std::byte> out) {
    size_t chunks = (out.size() + block_size_ - 1) / block_size_;
    std::atomic<size_t> next{0};
    std::mutex err_mu;
    Status first_error;
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < chunks;) {
        size_t begin = i * block_size_;
        size_t len = std::min<size_t>(block_size_, out.size() - begin);
        S3Request req = shared_->RangeGet(offset + begin, out.subspan(begin, len));
        Status s = shared_->client->Execute(req).status();
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (first_error.ok()) first_error = s;
          next.store(chunks);  // stop the others early
        }
      }
    };
    std::vector<std::thread> helpers;
    size_t workers = std::min<size_t>(static_cast<size_t>(parallel_), chunks);
    for (size_t w = 1; w < workers; ++w) helpers.emplace_back(work);
    work();
    for (auto& t : helpers) t.join();
    if (!first_error.ok()) return first_error;
    return out.size();
  }

  std::shared_ptr<Shared> shared_;
  const std::string uri_;
  const uint64_t block_size_;
  const int64_t parallel_;
  // Guarded by shared_->mu.
  std::map<uint64_t, std::shared_ptr<Block>> blocks_;
  uint64_t last_block_ = 0;
};

}  // namespace

std::unique_ptr<RandomAccessFile> MakeS3Reader(std::shared_ptr<S3Client> client, std::string bucket,
                                               std::string key, uint64_t size, std::string etag) {
  return std::make_unique<S3Reader>(std::move(client), std::move(bucket), std::move(key), size,
                                    std::move(etag));
}

}  // namespace reel::s3

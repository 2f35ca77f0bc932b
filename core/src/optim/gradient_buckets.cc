// Gradient buckets (see gradient_buckets.h).
#include "optim/gradient_buckets.h"

#include <algorithm>
#include <string>
#include <utility>

namespace reel::core {

std::vector<GradientRange> BucketLayout(const ParamArena& arena, int64_t bucket_bytes) {
  std::vector<GradientRange> out;
  const auto& blocks = arena.blocks();
  int64_t end = arena.total_size();  // the open bucket's end; its begin moves down
  for (size_t i = blocks.size(); i-- > 0;) {
    const int64_t begin = i == 0 ? 0 : blocks[i].offset;
    if ((end - begin) * static_cast<int64_t>(sizeof(float)) >= bucket_bytes || i == 0) {
      out.push_back({begin, end});
      end = begin;
    }
  }
  return out;
}

GradientBuckets::GradientBuckets(ParamArena& arena, Communicator& comm, int64_t bucket_bytes,
                                 int64_t timeout_ms, BucketReducer reducer)
    : arena_(arena),
      comm_(comm),
      timeout_ms_(timeout_ms),
      reducer_(std::move(reducer)),
      layout_(BucketLayout(arena, bucket_bytes)) {
  const auto& blocks = arena.blocks();
  bucket_of_block_.resize(blocks.size());
  missing_.assign(layout_.size(), 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    block_offsets_.push_back(blocks[i].offset);
    int b = 0;
    while (blocks[i].offset < layout_[static_cast<size_t>(b)].begin) ++b;
    bucket_of_block_[i] = b;
    ++missing_[static_cast<size_t>(b)];
  }
  reported_.assign(blocks.size(), 0);
  thread_ = std::thread([this] { Run(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == handed_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradientBuckets::GradientsReady(int64_t offset, int64_t size) {
  const auto& blocks = arena_.blocks();
  auto it = std::lower_bound(block_offsets_.begin(), block_offsets_.end(), offset);
  for (size_t i = static_cast<size_t>(it - block_offsets_.begin());
       i < blocks.size() && blocks[i].offset + blocks[i].size <= offset + size; ++i) {
    if (reported_[i]) continue;
    reported_[i] = 1;
    --missing_[static_cast<size_t>(bucket_of_block_[i])];
  }
  int ready = next_;
  while (ready < static_cast<int>(layout_.size()) && missing_[static_cast<size_t>(ready)] == 0)
    ++ready;
  if (ready > next_) {
    started_early_ = ready;
    HandOver(ready);
  }
}

void GradientBuckets::HandOver(int count) {
  next_ = count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handed_ = count;
  }
  cv_.notify_all();
}

Status GradientBuckets::Finish() {
  const int early = next_;
  HandOver(static_cast<int>(layout_.size()));
  Status failure;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == handed_; });
    failure = failure_;
    failure_ = Status::Ok();
    handed_ = done_ = 0;
  }
  next_ = 0;
  started_early_ = early;
  std::fill(reported_.begin(), reported_.end(), 0);
  std::fill(missing_.begin(), missing_.end(), 0);
  for (int b : bucket_of_block_) ++missing_[static_cast<size_t>(b)];
  return failure;
}

void GradientBuckets::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || done_ < handed_; });
    if (stop_) return;
    const GradientRange r = layout_[static_cast<size_t>(done_)];
    const bool skip = !failure_.ok();
    lock.unlock();
    Status s;
    if (!skip) {
      const Deadline deadline =
          timeout_ms_ == 0 ? NoDeadline() : DeadlineIn(std::chrono::milliseconds(timeout_ms_));
      // Backward runs beside it on this rank's cores: no busy waiting for the peers.
      comm_.SetComputeAlongside(true);
      std::span<float> bucket = arena_.grads().subspan(static_cast<size_t>(r.begin),
                                                       static_cast<size_t>(r.end - r.begin));
      s = reducer_ ? reducer_(bucket, deadline) : comm_.AllReduce(bucket, ReduceOp::kSum, deadline);
      comm_.SetComputeAlongside(false);
      if (!s.ok())
        s = s.WithContext("reducing gradient bucket [" + std::to_string(r.begin) + ", " +
                          std::to_string(r.end) + ")");
    }
    lock.lock();
    if (!s.ok() && failure_.ok()) failure_ = s;
    ++done_;
    if (done_ == handed_) cv_.notify_all();
  }
}

}  // namespace reel::core

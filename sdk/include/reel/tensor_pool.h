// TensorPool: recycles tensor storage for a producer that makes tensors of similar size again and
// again (a data source's batches). A fresh multi-megabyte allocation is mapped page by page as it
// is first written (a fault and a kernel zero-fill per 4 KiB); recycled storage is already mapped
// and often still in cache, so producing a batch costs only writing its values.
//
//   auto pool = TensorPool::Create(/*max_free=*/8);
//   Tensor t = pool->Acquire({32, 300, 1024});  // uninitialised, like Tensor::Uninitialized
//   // ... t's storage returns to the pool when t (or whatever it was moved into) is destroyed.
//
// Ownership: each acquired tensor keeps the pool alive (its release function holds a shared_ptr),
// so tensors may outlive the code that made the pool. At most `max_free` idle buffers are kept;
// beyond that the smallest are freed.
// Thread-safety: Acquire() and the release of tensors may happen on any threads concurrently.
#ifndef REEL_TENSOR_POOL_H_
#define REEL_TENSOR_POOL_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "reel/tensor.h"

namespace reel {

// A pool of tensor storage; create it with Create() (it must be owned by a shared_ptr).
class TensorPool : public std::enable_shared_from_this<TensorPool> {
 public:
  static std::shared_ptr<TensorPool> Create(size_t max_free) {
    return std::shared_ptr<TensorPool>(new TensorPool(max_free));
  }
  ~TensorPool() {
    for (const Buffer& b : free_) Free(b.data);
  }
  TensorPool(const TensorPool&) = delete;
  TensorPool& operator=(const TensorPool&) = delete;

  // An uninitialised owning tensor of `shape` (storage aligned to Tensor::kAlignment). Its
  // storage holds at least max(NumElements(shape), capacity) floats: the smallest idle buffer
  // that is large enough, or a new one of that size. Pass the largest size this producer will
  // ask for as `capacity`, so one buffer serves every later request.
  Tensor Acquire(Shape shape, size_t capacity = 0) {
    const size_t need = std::max(static_cast<size_t>(NumElements(shape)), capacity);
    Buffer buffer{nullptr, 0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->capacity >= need && (best == free_.end() || it->capacity < best->capacity))
          best = it;
      if (best != free_.end()) {
        buffer = *best;
        free_.erase(best);
        ++reused_;
      }
    }
    if (buffer.data == nullptr) {
      buffer = {static_cast<float*>(
                    ::operator new[](need * sizeof(float), std::align_val_t{Tensor::kAlignment})),
                need};
      std::lock_guard<std::mutex> lock(mu_);
      ++allocated_;
    }
    std::shared_ptr<TensorPool> self = shared_from_this();
    return Tensor::Adopt(
        std::move(shape),
        std::shared_ptr<float[]>(
            buffer.data, [self, cap = buffer.capacity](float* p) { self->Release(p, cap); }));
  }

  // Counters, for tests and monitoring.
  size_t idle_buffers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }
  size_t buffers_allocated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
  }
  size_t buffers_reused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reused_;
  }

 private:
  struct Buffer {
    float* data;
    size_t capacity;  // floats
  };

  explicit TensorPool(size_t max_free) : max_free_(max_free) {}

  static void Free(float* p) { ::operator delete[](p, std::align_val_t{Tensor::kAlignment}); }

  void Release(float* p, size_t capacity) {
    float* drop = p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < max_free_) {
        free_.push_back({p, capacity});
        drop = nullptr;
      } else if (!free_.empty()) {  // keep the larger buffers: they serve every request
        auto smallest = std::min_element(
            free_.begin(), free_.end(),
            [](const Buffer& a, const Buffer& b) { return a.capacity < b.capacity; });
        if (smallest->capacity < capacity) {
          drop = smallest->data;
          *smallest = {p, capacity};
        }
      }
    }
    if (drop != nullptr) Free(drop);
  }

  const size_t max_free_;
  mutable std::mutex mu_;
  std::vector<Buffer> free_;
  size_t allocated_ = 0;
  size_t reused_ = 0;
};

}  // namespace reel

#endif  // REEL_TENSOR_POOL_H_

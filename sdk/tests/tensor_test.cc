// Tensor ownership (owning, adopted, view) and TensorPool recycling, including release from other
// threads and tensors that outlive every other handle on their pool.
#include "reel/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "reel/tensor_pool.h"

namespace reel {
namespace {

bool Aligned(const float* p) { return reinterpret_cast<uintptr_t>(p) % Tensor::kAlignment == 0; }

TEST(TensorTest, OwningCopiesValuesViewsShareThem) {
  Tensor a({2, 3}, 1.5f);
  EXPECT_TRUE(Aligned(a.data()));
  Tensor b = a;
  EXPECT_NE(b.data(), a.data());
  b.data()[0] = 7.0f;
  EXPECT_EQ(a.data()[0], 1.5f);

  Tensor v = Tensor::View(a.data(), {6});
  Tensor w = v;
  EXPECT_TRUE(w.is_view());
  EXPECT_EQ(w.data(), a.data());

  Tensor moved = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(moved.size(), 6);
}

TEST(TensorTest, AdoptedStorageIsReleasedOnceWhenTheLastOwnerGoes) {
  int released = 0;
  {
    auto storage = std::shared_ptr<float[]>(new float[8], [&](float* p) {
      ++released;
      delete[] p;
    });
    Tensor t = Tensor::Adopt({2, 4}, std::move(storage));
    EXPECT_FALSE(t.is_view());
    Tensor copy = t;  // a deep copy: owns fresh storage
    EXPECT_NE(copy.data(), t.data());
    Tensor moved = std::move(t);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(TensorPoolTest, ReleasedStorageServesTheNextRequest) {
  auto pool = TensorPool::Create(4);
  float* first = nullptr;
  {
    Tensor t = pool->Acquire({4, 10, 8}, 4 * 20 * 8);
    first = t.data();
    EXPECT_TRUE(Aligned(first));
    EXPECT_EQ(t.size(), 320);
    EXPECT_EQ(pool->idle_buffers(), 0u);
  }
  EXPECT_EQ(pool->idle_buffers(), 1u);
  // A smaller request fits the capacity of the first buffer, so it gets the same memory.
  Tensor again = pool->Acquire({4, 20, 8});
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool->buffers_allocated(), 1u);
  EXPECT_EQ(pool->buffers_reused(), 1u);
  // A larger one does not fit and gets new memory.
  Tensor bigger = pool->Acquire({4, 21, 8});
  EXPECT_NE(bigger.data(), first);
  EXPECT_EQ(pool->buffers_allocated(), 2u);
}

TEST(TensorPoolTest, BestFitAndAtMostMaxFreeIdleBuffersKeepingTheLargest) {
  auto pool = TensorPool::Create(2);
  std::vector<Tensor> held;
  for (int64_t n : {100, 300, 200}) held.push_back(pool->Acquire({n}));
  const float* p200 = held[2].data();
  const float* p300 = held[1].data();
  for (Tensor& t : held) t = Tensor();  // releases 100, 300, 200 in order: 100 makes way for 200
  EXPECT_EQ(pool->idle_buffers(), 2u);
  Tensor mid = pool->Acquire({150});
  EXPECT_EQ(mid.data(), p200);  // the smallest that fits
  Tensor small = pool->Acquire({50});
  EXPECT_EQ(small.data(), p300);  // the only idle one left
  EXPECT_EQ(pool->buffers_allocated(), 3u);
  EXPECT_EQ(pool->buffers_reused(), 2u);
  EXPECT_EQ(pool->idle_buffers(), 0u);
}

TEST(TensorPoolTest, TensorsOutliveThePoolHandleAndMayBeReleasedOnOtherThreads) {
  std::vector<Tensor> tensors;
  {
    auto pool = TensorPool::Create(8);
    for (int i = 0; i < 8; ++i) tensors.push_back(pool->Acquire({1024}));
  }  // the caller's handle is gone; the tensors keep the pool alive
  for (auto& t : tensors) t.values()[1023] = 1.0f;  // still valid memory (ASan would say)

  auto pool = TensorPool::Create(64);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&pool] {
      for (int i = 0; i < 200; ++i) {
        Tensor t = pool->Acquire({256});
        t.values()[0] = static_cast<float>(i);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_LE(pool->buffers_allocated(), 4u);  // at most one in use per thread at a time
  EXPECT_EQ(pool->buffers_allocated() + pool->buffers_reused(), 800u);
}

}  // namespace
}  // namespace reel

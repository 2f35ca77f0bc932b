#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "executor.h"

namespace reel::core::tune {
namespace {

class ThreadExecutor : public Executor {
 public:
  ThreadExecutor(int slots, TrialRunner runner, std::function<bool()> stop)
      : slots_(slots),
        runner_(std::move(runner)),
        stop_(std::move(stop)),
        free_(static_cast<size_t>(slots)) {
    for (int i = 0; i < slots; ++i) free_[static_cast<size_t>(i)] = slots - 1 - i;
  }
  ~ThreadExecutor() override {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  int slots() const override { return slots_; }

  void Start(TrialJob job) override {
    const int slot = free_.back();
    free_.pop_back();
    if (static_cast<size_t>(slot) >= threads_.size())
      threads_.resize(static_cast<size_t>(slot) + 1);
    if (threads_[static_cast<size_t>(slot)].joinable()) threads_[static_cast<size_t>(slot)].join();
    job.request.should_stop = stop_;
    threads_[static_cast<size_t>(slot)] = std::thread([this, slot, job = std::move(job)]() mutable {
      const auto t0 = std::chrono::steady_clock::now();
      Completion c;
      c.run = runner_(job.request);
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      c.worker = slot;
      c.job = std::move(job);
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(c));
      cv_.notify_one();
    });
  }

  Completion Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !done_.empty(); });
    Completion c = std::move(done_.front());
    done_.pop_front();
    free_.push_back(c.worker);
    return c;
  }

 private:
  const int slots_;
  TrialRunner runner_;
  std::function<bool()> stop_;
  std::vector<int> free_;  // slots with no running trial (their thread may still need a join)
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Completion> done_;  // guarded by mu_
};

}  // namespace

std::unique_ptr<Executor> MakeThreadExecutor(int slots, TrialRunner runner,
                                             std::function<bool()> stop) {
  return std::make_unique<ThreadExecutor>(slots, std::move(runner), std::move(stop));
}

}  // namespace reel::core::tune

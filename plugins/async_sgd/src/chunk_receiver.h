// Receives a pipelined push's chunks (wire.h, kPushPull) on a thread of its own, in order, each
// receive posted as soon as the one before it ended, while the server's thread applies and returns
// the chunks before. A receive that is waiting when its message starts to arrive gets the bytes
// written straight into place (tcp's mailbox: it claims the message); one posted late takes them
// from the transport's staging buffer, a copy of every byte that arrived before it. On the
// server's one thread, a chunk's receive was posted only after the chunk before it was applied
// and sent back, by which time the worker had streamed most of it into staging.
//
// (A thread that sends the fresh chunks back, so that the update of the next chunk need not wait
// for the kernel to take this one, was tried too: no gain beyond noise on loopback with one
// worker; bench/results/async_sgd.md, section 9.)
//
// Thread-safety: Await() from one thread (the server's); the receiving thread is joined by the
// destructor, which a failed receive has already ended and which otherwise waits for the rest.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_CHUNK_RECEIVER_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_CHUNK_RECEIVER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <thread>

#include "reel/transport.h"

namespace reel::async_sgd {

class ChunkReceiver {
 public:
  // Receives `into` from rank `source` on `tag` as messages of `chunk` floats (the last one
  // short), each with a deadline from `deadline()`.
  ChunkReceiver(Communicator& comm, int source, int tag, std::span<float> into, size_t chunk,
                std::function<Deadline()> deadline)
      : thread_([this, &comm, source, tag, into, chunk, deadline = std::move(deadline)] {
          for (size_t at = 0; at < into.size(); at += chunk) {
            const size_t len = std::min(chunk, into.size() - at);
            Status s = comm.RecvInto(source, tag, std::as_writable_bytes(into.subspan(at, len)),
                                     deadline());
            if (!s.ok()) {
              failure_ = std::move(s);  // published by the release store below
              Publish(kFailed);
              return;
            }
            Publish(at + len);
          }
        }) {}
  ~ChunkReceiver() { thread_.join(); }
  ChunkReceiver(const ChunkReceiver&) = delete;
  ChunkReceiver& operator=(const ChunkReceiver&) = delete;

  // Waits until the floats [0, end) have arrived: Ok, or the error of the receive that failed
  // first (nothing after it arrives).
  Status Await(size_t end) {
    size_t got = received_.load(std::memory_order_acquire);
    while (got != kFailed && got < end) {
      received_.wait(got, std::memory_order_acquire);  // a futex: no lock, no missed wake-up
      got = received_.load(std::memory_order_acquire);
    }
    return got == kFailed ? failure_ : Status::Ok();
  }

 private:
  static constexpr size_t kFailed = std::numeric_limits<size_t>::max();
  void Publish(size_t received) {
    received_.store(received, std::memory_order_release);
    received_.notify_one();
  }
  std::atomic<size_t> received_{0};  // floats received, or kFailed
  Status failure_;                   // written before received_ becomes kFailed
  std::thread thread_;               // last: starts once the members above exist
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_CHUNK_RECEIVER_H_

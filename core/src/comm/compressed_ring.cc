// The compressed ring allreduce (see compressed_ring.h).
//
// The ring runs step by step: each step's chunks (one per chunk of a segment) are encoded into
// one buffer, sent by a thread of their own while this thread receives the left neighbour's
// chunks of the same step and decodes each as it arrives. Sending step s + 1 needs step s
// received and reduced, as in the schedule; a step's sends do not wait for one another.
#include "comm/compressed_ring.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

namespace reel::core {

Status CompressedRing::Run(Communicator& comm, std::span<float> data, ring::Part part,
                           Deadline deadline, std::span<float> residual) {
  if (part == ring::Part::kAllGather)
    return InvalidArgumentError("compressed ring: the all-gather half alone is not supported");
  if (!failed_.empty())
    return FailedPreconditionError("compressed ring: unusable since an exchange failed (" +
                                   failed_ + ")");
  if (!residual.empty() && residual.size() != data.size())
    return InvalidArgumentError("compressed ring: residual of " + std::to_string(residual.size()) +
                                " floats for " + std::to_string(data.size()));
  if (comm.size() == 1 || data.empty()) return Status::Ok();
  Status s = RunRing(comm, data, part, deadline, residual);
  if (!s.ok()) {
    s = s.WithContext("compressed ring (" +
                      std::string(format_ == WireFormat::kBf16 ? "bf16" : "fp16") + ", " +
                      std::to_string(data.size()) + " floats)");
    failed_ = s.message();
  }
  return s;
}

void CompressedRing::EncodeSent(std::span<float> chunk, std::span<std::byte> wire,
                                std::span<float> residual, bool keep) {
  EncodeChunk(format_, chunk, wire);
  if (residual.empty()) {
    if (keep) DecodeChunk(format_, wire, chunk, /*add=*/false);
    return;
  }
  decoded_.resize(chunk.size());
  DecodeChunk(format_, wire, decoded_, /*add=*/false);
  for (size_t i = 0; i < chunk.size(); ++i) {
    const float lost = chunk[i] - decoded_[i];
    if (std::isfinite(lost)) residual[i] += lost;  // a non-finite value leaves nothing behind
    if (keep) chunk[i] = decoded_[i];
  }
}

Status CompressedRing::RunRing(Communicator& comm, std::span<float> data, ring::Part part,
                               Deadline deadline, std::span<float> residual) {
  const int n = comm.size(), r = comm.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const ring::Schedule schedule(data.size(), n, r, kChunkBytes, part);
  const int64_t chunks = static_cast<int64_t>(schedule.chunks());
  const size_t slot = EncodedBytes(schedule.max_chunk());
  send_.resize(static_cast<size_t>(chunks) * slot);
  recv_.resize(static_cast<size_t>(chunks) * slot);
  const int64_t first_gather = schedule.units() / 2;  // the first all-gather unit
  auto bytes = [&](std::vector<std::byte>& buf, int64_t u, size_t floats) {
    return std::span<std::byte>(buf).subspan(static_cast<size_t>(u % chunks) * slot,
                                             EncodedBytes(floats));
  };
  for (int64_t step = schedule.begin(); step < schedule.end(); step += chunks) {
    const bool gathering = step >= first_gather;
    if (step > first_gather) {
      // Later all-gather steps forward what the step before received, bytes unchanged.
      std::swap(send_, recv_);
    } else {
      for (int64_t u = step; u < step + chunks; ++u) {
        std::span<float> chunk = schedule.Chunk(data, u, /*sent=*/true);
        std::span<float> lost;
        if (!residual.empty()) lost = schedule.Chunk(residual, u, /*sent=*/true);
        // The owner of a finished chunk keeps what every other rank will decode.
        EncodeSent(chunk, bytes(send_, u, chunk.size()), lost, /*keep=*/gathering);
      }
    }
    Status sent;
    std::thread sender([&] {
      for (int64_t u = step; u < step + chunks && sent.ok(); ++u)
        sent = comm.Send(right, tag_,
                         bytes(send_, u, schedule.Chunk(data, u, /*sent=*/true).size()), deadline);
    });
    Status received;
    for (int64_t u = step; u < step + chunks && received.ok(); ++u) {
      std::span<float> into = schedule.Chunk(data, u, /*sent=*/false);
      std::span<std::byte> wire = bytes(recv_, u, into.size());
      received = comm.RecvInto(left, tag_, wire, deadline);
      if (received.ok()) {
        DecodeChunk(format_, wire, into, /*add=*/!gathering);
      } else {
        received = received.WithContext("chunk of " + std::to_string(into.size()) +
                                        " values from rank " + std::to_string(left));
      }
    }
    sender.join();
    if (!received.ok()) return received;
    if (!sent.ok()) return sent.WithContext("sending to rank " + std::to_string(right));
  }
  return Status::Ok();
}

}  // namespace reel::core

// libFuzzer target: the tcp transport's frame stream (plugins/tcp/src/frame_reader.h and the
// Mailbox behind it), i.e. every byte an authenticated peer sends after the handshake, however
// the socket cuts it. tcp_wire checks one frame header at a time; this target runs the state
// machine that follows the headers: payloads read into waiting receives or staged, failure
// notices, goodbyes, frames that break the protocol, and a stream that ends mid-frame.
//
// Input: byte 0 picks the world size (2-4), whether a receive waits before the bytes arrive
// (then bytes 1-2 give its tag, 3 its size) and whether native collectives run (byte 2 numbers
// them); byte 4 seeds the sizes in which the socket hands the rest over. Whatever the bytes, the
// reader must end Left or Failed, a waiting receive must end with its message, a size mismatch,
// or Unavailable (rank 1 gone), and memory must follow the bytes that arrived, not the lengths
// that headers claim.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "frame_reader.h"
#include "mailbox.h"

namespace reel::tcp {
namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace
}  // namespace reel::tcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::tcp;
  if (size < 5) return 0;
  const int world = 2 + data[0] % 3;
  const bool post_first = (data[0] & 0x10) != 0;
  const int tag = data[1] | (data[2] << 8);
  const size_t want = data[3];
  uint32_t cut = data[4] | 1u;  // an odd seed: never a zero-length hand-over
  std::span<const uint8_t> in(data + 5, size - 5);

  Mailbox mailbox("fuzz rank 0", /*rank=*/0, world);
  int notices = 0;
  FrameReader reader(mailbox, /*source=*/1, world, [&](int failed, const std::string& why) {
    Require(failed >= 0 && failed < world && !why.empty());
    ++notices;
  });

  std::string out(want, '\0');
  Mailbox::Posted posted;
  posted.source = 1;
  posted.tag = tag;
  posted.out = std::as_writable_bytes(std::span<char>(out));
  if (post_first) mailbox.Post(posted);

  // With bit 5 of byte 0, native collectives run meanwhile: number byte 2 starts first and the
  // next one halfway through the bytes, so that collective frames of earlier numbers are dropped
  // whether queued, arriving or half read.
  const bool collectives = (data[0] & 0x20) != 0;
  if (collectives) mailbox.StartCollective(data[2]);

  // Hand the bytes over in pieces of 1..64 bytes, as a socket might.
  size_t at = 0;
  bool started_next = false;
  while (at < in.size() && reader.state() == FrameReader::State::kReading) {
    if (collectives && !started_next && at >= in.size() / 2) {
      mailbox.StartCollective(data[2] + 1u);
      started_next = true;
    }
    std::span<std::byte> buffer = reader.Buffer();
    Require(!buffer.empty());
    cut = cut * 1103515245u + 12345u;
    size_t n = std::min({buffer.size(), in.size() - at, size_t{1} + (cut >> 16) % 64});
    std::memcpy(buffer.data(), in.data() + at, n);
    reader.Consumed(n);
    at += n;
  }
  if (reader.state() == FrameReader::State::kReading) reader.Broke("end of the fuzz input");
  if (reader.state() == FrameReader::State::kFailed) {
    Require(!reader.failure().empty());
    mailbox.PeerFailed(1, reader.failure());
    reader.AbortMessage();
  } else if (reader.state() == FrameReader::State::kLeft) {
    mailbox.PeerLeft(1);
  }
  Require(!reader.mid_message());

  if (post_first) {
    // The stream is over: the receive either got its message or learns why it never will.
    // As the native allreduce does: a receive not done asks why and is withdrawn.
    if (!mailbox.Done(posted)) {
      reel::Status why = mailbox.CanReceive(1, tag);
      Require(why.code() == reel::StatusCode::kUnavailable);
      mailbox.Withdraw(posted, why);
    }
    const reel::StatusCode code = posted.status.code();
    Require(posted.status.ok() ? std::string_view(out).size() == want
                               : code == reel::StatusCode::kUnavailable ||
                                     code == reel::StatusCode::kInvalidArgument);
  } else {
    // A receive after the fact takes a queued message or fails at once: rank 1 is gone.
    reel::Status s =
        mailbox.RecvInto(1, tag, posted.out, reel::DeadlineIn(std::chrono::seconds(0)));
    Require(s.ok() || s.code() == reel::StatusCode::kUnavailable ||
            s.code() == reel::StatusCode::kInvalidArgument ||
            s.code() == reel::StatusCode::kDeadlineExceeded);
  }
  Require(notices >= 0);
  return 0;
}

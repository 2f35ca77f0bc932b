// Reads the frames (wire.h) of one incoming connection into the Mailbox, from bytes however
// they arrive: it owns no socket. Whoever owns the connection asks Buffer() where the next bytes
// go, reads at most that many there, and reports them with Consumed(). The io thread feeds it
// normally; a collective that takes the connection over (TcpCommunicator::AllReduce) feeds it
// from the calling thread, and the io thread carries on where it stopped, even mid-frame.
//
// Thread-safety: used by one thread at a time; whoever hands the connection over synchronises.
#ifndef REEL_PLUGINS_TCP_SRC_FRAME_READER_H_
#define REEL_PLUGINS_TCP_SRC_FRAME_READER_H_

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "mailbox.h"
#include "wire.h"

namespace reel::tcp {

class FrameReader {
 public:
  // Called for a failure notice: rank `failed` failed, `why` as the sender reported it.
  using NoticeHandler = std::function<void(int failed, const std::string& why)>;
  // Frames from rank `source` of a group of `world` ranks.
  FrameReader(Mailbox& mailbox, int source, int world, NoticeHandler on_notice);

  enum class State {
    kReading,  // frames keep coming
    kLeft,     // the peer said goodbye
    kFailed,   // the peer broke the protocol or the connection broke (failure())
  };
  State state() const { return state_; }
  const std::string& failure() const { return failure_; }

  // Whether the next bytes may be read now: always for a frame's header (24 bytes) and a
  // notice's reason (at most kMaxNoticeBytes); for a message's payload, Mailbox::Inbound::Ready
  // (the receive budget). Every reader of the connection asks before it reads.
  bool Ready() { return !inbound_ || inbound_->Ready(); }
  // Where the next bytes go (never empty while kReading).
  std::span<std::byte> Buffer();
  // `n` > 0 bytes were read into Buffer(). Delivers what is complete; may end the reading.
  void Consumed(size_t n);
  // The connection broke (`why`, e.g. end of stream): ends the reading (kFailed); `why` gains
  // " in the middle of a message" when one was arriving.
  void Broke(const std::string& why);
  // After a failure: fails the receive that the message arriving was being read into, naming
  // the peer and failure(). Separate so that the owner can first tell the other ranks (a woken
  // receiver may end the process).
  void AbortMessage();
  // True while a data message's payload is being read.
  bool mid_message() const { return inbound_.has_value(); }
  // True between frames: the next byte starts a frame's header.
  bool between_frames() const { return !inbound_ && !notice_ && header_got_ == 0; }
  // If the message arriving is being read into `p`, hands `p` back done with `status` (the rest
  // of the message is staged and queued as if nobody had waited for it).
  void ReleaseClaim(const Mailbox::Posted& p, const Status& status);
  // Hands back the receive being filled if it passed its deadline (Inbound::ReleaseIfAbandoned).
  void ReleaseAbandoned() {
    if (inbound_) inbound_->ReleaseIfAbandoned();
  }

 private:
  void Header();
  void Fail(std::string why);

  Mailbox& mailbox_;
  const int source_, world_;
  NoticeHandler on_notice_;
  State state_ = State::kReading;
  std::string failure_;
  std::array<std::byte, kFrameHeaderBytes> header_{};
  size_t header_got_ = 0;
  std::optional<Mailbox::Inbound> inbound_;  // a data message's payload arriving
  std::optional<FrameHeader> notice_;        // a failure notice's reason arriving
  std::string reason_;
  size_t reason_got_ = 0;
};

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_FRAME_READER_H_

// Reading one connection's frames into the Mailbox (see frame_reader.h).
#include "frame_reader.h"

#include <utility>

namespace reel::tcp {

FrameReader::FrameReader(Mailbox& mailbox, int source, int world, NoticeHandler on_notice)
    : mailbox_(mailbox), source_(source), world_(world), on_notice_(std::move(on_notice)) {}

std::span<std::byte> FrameReader::Buffer() {
  if (inbound_) return inbound_->Next();
  if (notice_) return std::as_writable_bytes(std::span(reason_)).subspan(reason_got_);
  return std::span(header_).subspan(header_got_);
}

void FrameReader::Consumed(size_t n) {
  if (inbound_) {
    inbound_->Advance(n);
    if (inbound_->remaining() > 0) return;
    inbound_->Finish();
    inbound_.reset();
    return;
  }
  if (notice_) {
    reason_got_ += n;
    if (reason_got_ < reason_.size()) return;
    const FrameHeader notice = *std::exchange(notice_, std::nullopt);
    if (notice.tag >= static_cast<uint32_t>(world_))
      return Fail("it sent a failure notice for rank " + std::to_string(notice.tag));
    on_notice_(static_cast<int>(notice.tag),
               "reported by rank " + std::to_string(source_) + ": " + reason_);
    return;
  }
  header_got_ += n;
  if (header_got_ == header_.size()) Header();
}

void FrameReader::Header() {
  header_got_ = 0;
  Result<FrameHeader> header = DecodeFrameHeader(header_);
  if (!header.ok())
    return Fail("it sent bytes that are not the protocol: " + header.status().message());
  if (header->source != static_cast<uint32_t>(source_))
    return Fail("it sent a frame claiming to come from rank " + std::to_string(header->source));
  switch (header->type) {
    case FrameType::kHeartbeat:
      return;
    case FrameType::kGoodbye:
      state_ = State::kLeft;
      return;
    case FrameType::kPeerFailed:
      reason_.assign(header->length, '\0');
      reason_got_ = 0;
      notice_ = *header;
      if (header->length == 0) Consumed(0);
      return;
    case FrameType::kData:
    case FrameType::kCollective:
      inbound_.emplace(mailbox_.Begin(source_,
                                      header->type == FrameType::kData
                                          ? static_cast<int>(header->tag)
                                          : Mailbox::CollectiveTag(header->tag),
                                      header->length));
      if (header->length == 0) {
        inbound_->Finish();
        inbound_.reset();
      }
      return;
  }
}

void FrameReader::Broke(const std::string& why) {
  if (state_ != State::kReading) return;
  const bool mid = mid_message();
  Fail(why + (mid ? " in the middle of a message" : ""));
}

void FrameReader::Fail(std::string why) {
  state_ = State::kFailed;
  failure_ = std::move(why);
  notice_.reset();
}

void FrameReader::AbortMessage() {
  if (inbound_) {
    inbound_->Fail(UnavailableError(mailbox_.where() + ": rank " + std::to_string(source_) +
                                    " is unavailable: " + failure_));
    inbound_.reset();
  }
}

void FrameReader::ReleaseClaim(const Mailbox::Posted& p, const Status& status) {
  if (inbound_) inbound_->Unclaim(p, status);
}

}  // namespace reel::tcp

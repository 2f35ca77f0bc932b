// libFuzzer target: the tcp transport's wire decoders (plugins/tcp/src/wire.h), the first bytes a
// peer (or anyone who can reach the port) sends. The input's first byte picks the decoder
// (handshake Hello, Challenge and Response, control header, join endpoint, progress rank set,
// rank table, data frame header); the rest is the bytes. A decoder must return a value or
// InvalidArgument, never read past its span; a decoded message must encode back to exactly its
// input (fixed-size messages: every byte is checked) or to bytes that decode to the same value.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire.h"

namespace reel::tcp {
namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

template <typename T>
void RequireRejectedOr(const Result<T>& r) {
  if (!r.ok()) Require(r.status().code() == StatusCode::kInvalidArgument);
}

template <typename Array>
bool SameBytes(const Array& encoded, std::span<const std::byte> input) {
  return encoded.size() == input.size() &&
         std::equal(encoded.begin(), encoded.end(), input.begin());
}

}  // namespace
}  // namespace reel::tcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::tcp;
  if (size == 0) return 0;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  // World sizes for the bodies that depend on one: small, and from the input.
  const uint32_t world = 1 + data[0] / 8;
  switch (data[0] % 8) {
    case 0: {
      auto h = DecodeHello(in);
      RequireRejectedOr(h);
      if (h.ok()) Require(SameBytes(EncodeHello(*h), in));
      break;
    }
    case 1: {
      auto c = DecodeChallenge(in);
      RequireRejectedOr(c);
      if (c.ok()) Require(SameBytes(EncodeChallenge(*c), in));
      break;
    }
    case 2: {
      auto m = DecodeResponse(in);
      RequireRejectedOr(m);
      if (m.ok()) Require(SameBytes(EncodeResponse(*m), in));
      break;
    }
    case 3: {
      auto h = DecodeControlHeader(in);
      RequireRejectedOr(h);
      if (h.ok()) {
        Require(h->length <= kMaxControlBody);
        std::vector<std::byte> body(h->length);
        std::vector<std::byte> encoded = EncodeControl(h->type, body);
        Require(SameBytes(std::span(encoded).first(kControlHeaderBytes), in));
      }
      break;
    }
    case 4: {
      auto e = DecodeMember(in);
      RequireRejectedOr(e);
      if (e.ok()) Require(SameBytes(EncodeMember(*e), in));
      break;
    }
    case 5: {
      auto r = DecodeRankSet(in, world);
      RequireRejectedOr(r);
      if (r.ok()) Require(r->size() == world && *DecodeRankSet(EncodeRankSet(*r), world) == *r);
      break;
    }
    case 6: {
      auto t = DecodeTable(in, world);
      RequireRejectedOr(t);
      if (t.ok()) Require(t->size() == world && SameBytes(EncodeTable(*t), in));
      break;
    }
    case 7: {
      auto f = DecodeFrameHeader(in);
      RequireRejectedOr(f);
      if (f.ok()) Require(SameBytes(EncodeFrameHeader(*f), in));
      break;
    }
  }
  return 0;
}

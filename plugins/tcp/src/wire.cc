// The tcp transport's wire format (see wire.h for the layout).
#include "wire.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "reel/transport.h"

namespace reel::tcp {
namespace {

constexpr char kHelloMagic[4] = {'R', 'L', 'H', 'e'};
constexpr char kChallengeMagic[4] = {'R', 'L', 'C', 'h'};
constexpr char kResponseMagic[4] = {'R', 'L', 'R', 'e'};
constexpr char kControlMagic[4] = {'R', 'L', 'C', 'o'};
constexpr char kFrameMagic[4] = {'R', 'L', 'F', 'r'};

// Little-endian writing into a byte vector and bounds-checked reading from a span.
class Writer {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void U8(uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void U16(uint16_t v) { Uint(v, 2); }
  void U32(uint32_t v) { Uint(v, 4); }
  void U64(uint64_t v) { Uint(v, 8); }
  std::vector<std::byte> Take() { return std::move(out_); }

 private:
  void Uint(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, const char* what) : in_(in), what_(what) {}
  bool Has(size_t n) const { return in_.size() - pos_ >= n; }
  size_t left() const { return in_.size() - pos_; }
  uint64_t Uint(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  void Copy(void* out, size_t n) {
    std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
  }
  bool Magic(const char (&m)[4]) {
    bool ok = std::memcmp(in_.data() + pos_, m, 4) == 0;
    pos_ += 4;
    return ok;
  }
  Status Error(const std::string& why) const {
    return InvalidArgumentError(std::string(what_) + ": " + why);
  }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
  const char* what_;
};

// Magic, version byte, one free byte returned in *b5, reserved u16 that must be zero.
Status ReadPreamble(Reader& r, const char (&magic)[4], size_t size, size_t have, uint8_t* b5) {
  if (have != size)
    return r.Error(std::to_string(have) + " bytes, expected " + std::to_string(size));
  if (!r.Magic(magic)) return r.Error("bad magic (not the reel tcp protocol)");
  const auto version = static_cast<uint8_t>(r.Uint(1));
  if (version != kWireVersion)
    return r.Error("protocol version " + std::to_string(version) + ", this build speaks " +
                   std::to_string(kWireVersion));
  *b5 = static_cast<uint8_t>(r.Uint(1));
  if (r.Uint(2) != 0) return r.Error("reserved bytes are not zero");
  return Status::Ok();
}

// The oldest error in OpenSSL's queue of this thread, in words, and the queue cleared.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no error recorded";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

template <size_t N>
std::array<std::byte, N> ToArray(const std::vector<std::byte>& v) {
  std::array<std::byte, N> a{};
  std::memcpy(a.data(), v.data(), N);
  return a;
}

Result<Mac> Hmac(std::string_view secret, std::string_view label, std::span<const std::byte> a,
                 std::span<const std::byte> b) {
  std::vector<unsigned char> input;
  input.reserve(label.size() + a.size() + b.size());
  input.insert(input.end(), label.begin(), label.end());
  for (std::byte x : a) input.push_back(static_cast<unsigned char>(x));
  for (std::byte x : b) input.push_back(static_cast<unsigned char>(x));
  Mac mac{};
  unsigned int len = 0;
  static const char kEmptyKey = 0;  // HMAC() wants a valid pointer for an empty key
  if (secret.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return InvalidArgumentError("tcp: the shared secret is too long for HMAC");
  const EVP_MD* sha256 = EVP_sha256();
  // A failure must not leave `mac` as zeros that both sides would then agree on: it is an error.
  if (sha256 == nullptr ||
      HMAC(sha256, secret.empty() ? &kEmptyKey : secret.data(), static_cast<int>(secret.size()),
           input.data(), input.size(), reinterpret_cast<unsigned char*>(mac.data()),
           &len) == nullptr ||
      len != kMacBytes)
    return InternalError(
        "tcp: computing the handshake's HMAC-SHA256 failed (OpenSSL: " + OpenSslError() + ")");
  return mac;
}

// A job identity as kJobIdBytes, NUL-padded (the encoder's caller checked it: reel/job_id.h).
void WriteJobId(Writer& w, const std::string& id) {
  std::array<char, kJobIdBytes> field{};
  std::memcpy(field.data(), id.data(), std::min(id.size(), kJobIdBytes));
  w.Bytes(field.data(), kJobIdBytes);
}
Result<std::string> ReadJobId(Reader& r) {
  std::array<char, kJobIdBytes> field{};
  r.Copy(field.data(), kJobIdBytes);
  const auto end = std::find(field.begin(), field.end(), '\0');
  if (std::any_of(end, field.end(), [](char c) { return c != '\0'; }))
    return r.Error("job identity has bytes after its end");
  if (std::any_of(field.begin(), end, [](char c) { return c <= ' ' || c > '~'; }))
    return r.Error("job identity contains a non-printable character");
  return std::string(field.begin(), end);
}

}  // namespace

std::array<std::byte, kHelloBytes> EncodeHello(const Hello& h) {
  Writer w;
  w.Bytes(kHelloMagic, 4);
  w.U8(kWireVersion);
  w.U8(static_cast<uint8_t>(h.purpose));
  w.U16(0);
  w.U32(h.rank);
  w.U32(h.world_size);
  w.Bytes(h.nonce.data(), kNonceBytes);
  w.Bytes(h.job.data(), kNonceBytes);
  WriteJobId(w, h.job_id);
  return ToArray<kHelloBytes>(w.Take());
}

Result<Hello> DecodeHello(std::span<const std::byte> bytes) {
  Reader r(bytes, "handshake hello");
  uint8_t purpose = 0;
  REEL_RETURN_IF_ERROR(ReadPreamble(r, kHelloMagic, kHelloBytes, bytes.size(), &purpose));
  if (purpose != static_cast<uint8_t>(Purpose::kJoin) &&
      purpose != static_cast<uint8_t>(Purpose::kData))
    return r.Error("unknown purpose " + std::to_string(purpose));
  Hello h;
  h.purpose = static_cast<Purpose>(purpose);
  h.rank = static_cast<uint32_t>(r.Uint(4));
  h.world_size = static_cast<uint32_t>(r.Uint(4));
  r.Copy(h.nonce.data(), kNonceBytes);
  r.Copy(h.job.data(), kNonceBytes);
  REEL_ASSIGN_OR_RETURN(h.job_id, ReadJobId(r));
  if (h.world_size == 0 || h.rank >= h.world_size)
    return r.Error("rank " + std::to_string(h.rank) + " outside world size " +
                   std::to_string(h.world_size));
  return h;
}

std::array<std::byte, kChallengeBytes> EncodeChallenge(const Challenge& c) {
  Writer w;
  w.Bytes(kChallengeMagic, 4);
  w.U8(kWireVersion);
  w.U8(0);
  w.U16(0);
  w.U32(c.rank);
  w.U32(c.world_size);
  w.Bytes(c.nonce.data(), kNonceBytes);
  w.Bytes(c.job.data(), kNonceBytes);
  WriteJobId(w, c.job_id);
  w.Bytes(c.mac.data(), kMacBytes);
  return ToArray<kChallengeBytes>(w.Take());
}

Result<Challenge> DecodeChallenge(std::span<const std::byte> bytes) {
  Reader r(bytes, "handshake challenge");
  uint8_t unused = 0;
  REEL_RETURN_IF_ERROR(ReadPreamble(r, kChallengeMagic, kChallengeBytes, bytes.size(), &unused));
  if (unused != 0) return r.Error("reserved bytes are not zero");
  Challenge c;
  c.rank = static_cast<uint32_t>(r.Uint(4));
  c.world_size = static_cast<uint32_t>(r.Uint(4));
  r.Copy(c.nonce.data(), kNonceBytes);
  r.Copy(c.job.data(), kNonceBytes);
  REEL_ASSIGN_OR_RETURN(c.job_id, ReadJobId(r));
  r.Copy(c.mac.data(), kMacBytes);
  return c;
}

std::array<std::byte, kResponseBytes> EncodeResponse(const Mac& mac) {
  Writer w;
  w.Bytes(kResponseMagic, 4);
  w.U8(kWireVersion);
  w.U8(0);
  w.U16(0);
  w.Bytes(mac.data(), kMacBytes);
  return ToArray<kResponseBytes>(w.Take());
}

Result<Mac> DecodeResponse(std::span<const std::byte> bytes) {
  Reader r(bytes, "handshake response");
  uint8_t unused = 0;
  REEL_RETURN_IF_ERROR(ReadPreamble(r, kResponseMagic, kResponseBytes, bytes.size(), &unused));
  if (unused != 0) return r.Error("reserved bytes are not zero");
  Mac mac{};
  r.Copy(mac.data(), kMacBytes);
  return mac;
}

Result<Mac> ServerMac(std::string_view secret, std::span<const std::byte, kHelloBytes> hello,
                      std::span<const std::byte, kChallengeBytes> challenge) {
  return Hmac(secret, "reel-tcp server", hello, challenge.first(kChallengeBytes - kMacBytes));
}

Result<Mac> ClientMac(std::string_view secret, std::span<const std::byte, kHelloBytes> hello,
                      std::span<const std::byte, kChallengeBytes> challenge) {
  return Hmac(secret, "reel-tcp client", hello, challenge);
}

std::string JobName(const std::string& job_id) { return job_id.empty() ? "(none)" : job_id; }

bool MacsEqual(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0;
}

Result<Nonce> FreshNonce() {
  Nonce n{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    return InternalError("tcp: the system's random generator failed (RAND_bytes)");
  return n;
}

bool IsZero(const Nonce& n) {
  return std::all_of(n.begin(), n.end(), [](std::byte b) { return b == std::byte{0}; });
}

std::string ShortHex(const Nonce& n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < 6; ++i) {
    out += kDigits[static_cast<uint8_t>(n[i]) >> 4];
    out += kDigits[static_cast<uint8_t>(n[i]) & 15];
  }
  return out;
}

std::vector<std::byte> EncodeControl(ControlType type, std::span<const std::byte> body) {
  Writer w;
  w.Bytes(kControlMagic, 4);
  w.U8(static_cast<uint8_t>(type));
  w.U8(0);
  w.U16(0);
  w.U32(static_cast<uint32_t>(body.size()));
  w.Bytes(body.data(), body.size());
  return w.Take();
}

Result<ControlHeader> DecodeControlHeader(std::span<const std::byte> bytes) {
  Reader r(bytes, "control message");
  if (bytes.size() != kControlHeaderBytes)
    return r.Error(std::to_string(bytes.size()) + " header bytes, expected " +
                   std::to_string(kControlHeaderBytes));
  if (!r.Magic(kControlMagic)) return r.Error("bad magic (not the reel tcp protocol)");
  const auto type = static_cast<uint8_t>(r.Uint(1));
  if (type < static_cast<uint8_t>(ControlType::kAccept) ||
      type > static_cast<uint8_t>(ControlType::kTable))
    return r.Error("unknown type " + std::to_string(type));
  if (r.Uint(1) != 0 || r.Uint(2) != 0) return r.Error("reserved bytes are not zero");
  ControlHeader h{static_cast<ControlType>(type), static_cast<uint32_t>(r.Uint(4))};
  if (h.length > kMaxControlBody)
    return r.Error("body of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                   std::to_string(kMaxControlBody));
  return h;
}

namespace {
void WriteText(Writer& w, const std::string& text) {
  w.U8(static_cast<uint8_t>(text.size()));
  w.Bytes(text.data(), text.size());
}
// 1 to kMaxHostBytes printable characters without spaces, after a u8 length.
Result<std::string> ReadText(Reader& r, const char* what) {
  if (!r.Has(1)) return r.Error(std::string("truncated ") + what);
  const size_t len = static_cast<size_t>(r.Uint(1));
  if (len == 0) return r.Error(std::string("empty ") + what);
  if (!r.Has(len)) return r.Error(std::string("truncated ") + what);
  std::string text(len, '\0');
  r.Copy(text.data(), len);
  for (char c : text)
    if (c <= ' ' || c > '~')
      return r.Error(std::string(what) + " contains a non-printable character");
  return text;
}
void WriteMember(Writer& w, const Member& m) {
  w.U16(m.endpoint.port);
  WriteText(w, m.endpoint.host);
  WriteText(w, m.machine);
  WriteText(w, m.options);
}
Result<Member> ReadMember(Reader& r) {
  if (!r.Has(2)) return r.Error("truncated endpoint");
  Member m;
  m.endpoint.port = static_cast<uint16_t>(r.Uint(2));
  REEL_ASSIGN_OR_RETURN(m.endpoint.host, ReadText(r, "host"));
  if (m.endpoint.port == 0) return r.Error("port 0 for host " + m.endpoint.host);
  REEL_ASSIGN_OR_RETURN(m.machine, ReadText(r, "machine id"));
  REEL_ASSIGN_OR_RETURN(m.options, ReadText(r, "options"));
  return m;
}
}  // namespace

std::vector<std::byte> EncodeMember(const Member& m) {
  Writer w;
  WriteMember(w, m);
  return w.Take();
}

Result<Member> DecodeMember(std::span<const std::byte> body) {
  Reader r(body, "join message");
  REEL_ASSIGN_OR_RETURN(Member m, ReadMember(r));
  if (r.left() != 0) return r.Error(std::to_string(r.left()) + " trailing bytes");
  return m;
}

std::vector<std::byte> EncodeRankSet(const std::vector<bool>& ranks) {
  std::vector<std::byte> out((ranks.size() + 7) / 8);
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i]) out[i / 8] |= static_cast<std::byte>(1u << (i % 8));
  return out;
}

Result<std::vector<bool>> DecodeRankSet(std::span<const std::byte> body, uint32_t world_size) {
  const size_t want = (size_t{world_size} + 7) / 8;
  if (body.size() != want)
    return InvalidArgumentError("progress message: " + std::to_string(body.size()) +
                                " bytes, expected " + std::to_string(want) + " for " +
                                std::to_string(world_size) + " ranks");
  std::vector<bool> ranks(world_size);
  for (size_t i = 0; i < body.size() * 8; ++i) {
    const bool set = (static_cast<unsigned>(body[i / 8]) >> (i % 8)) & 1u;
    if (i < world_size)
      ranks[i] = set;
    else if (set)
      return InvalidArgumentError("progress message: bit set for rank " + std::to_string(i) +
                                  " outside world size " + std::to_string(world_size));
  }
  return ranks;
}

std::vector<std::byte> EncodeTable(const std::vector<Member>& table) {
  Writer w;
  w.U32(static_cast<uint32_t>(table.size()));
  for (const Member& m : table) WriteMember(w, m);
  return w.Take();
}

Result<std::vector<Member>> DecodeTable(std::span<const std::byte> body, uint32_t world_size) {
  Reader r(body, "rank table");
  if (!r.Has(4)) return r.Error("truncated count");
  const auto count = static_cast<uint32_t>(r.Uint(4));
  if (count != world_size)
    return r.Error(std::to_string(count) + " ranks, expected world size " +
                   std::to_string(world_size));
  std::vector<Member> table;
  for (uint32_t i = 0; i < count; ++i) {
    Result<Member> e = ReadMember(r);
    if (!e.ok()) return e.status().WithContext("rank " + std::to_string(i));
    table.push_back(std::move(*e));
  }
  if (r.left() != 0) return r.Error(std::to_string(r.left()) + " trailing bytes");
  return table;
}

std::array<std::byte, kFrameHeaderBytes> EncodeFrameHeader(const FrameHeader& h) {
  Writer w;
  w.Bytes(kFrameMagic, 4);
  w.U8(kWireVersion);
  w.U8(static_cast<uint8_t>(h.type));
  w.U16(0);
  w.U32(h.source);
  w.U32(h.tag);
  w.U64(h.length);
  return ToArray<kFrameHeaderBytes>(w.Take());
}

Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes) {
  Reader r(bytes, "frame header");
  uint8_t type = 0;
  REEL_RETURN_IF_ERROR(ReadPreamble(r, kFrameMagic, kFrameHeaderBytes, bytes.size(), &type));
  if (type < static_cast<uint8_t>(FrameType::kData) ||
      type > static_cast<uint8_t>(FrameType::kCollective))
    return r.Error("unknown frame type " + std::to_string(type));
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.source = static_cast<uint32_t>(r.Uint(4));
  h.tag = static_cast<uint32_t>(r.Uint(4));
  h.length = r.Uint(8);
  if ((h.type == FrameType::kHeartbeat || h.type == FrameType::kGoodbye) &&
      (h.tag != 0 || h.length != 0))
    return r.Error("heartbeat or goodbye frame with a tag or payload");
  if (h.type == FrameType::kPeerFailed && h.length > kMaxNoticeBytes)
    return r.Error("failure notice of " + std::to_string(h.length) + " bytes exceeds " +
                   std::to_string(kMaxNoticeBytes));
  if (h.type == FrameType::kCollective && h.tag > kCollectiveSeqMask)
    return r.Error("collective number " + std::to_string(h.tag) + " outside [0, " +
                   std::to_string(kCollectiveSeqMask) + "]");
  if (h.type != FrameType::kCollective && h.tag > static_cast<uint32_t>(kMaxTag))
    return r.Error("tag " + std::to_string(h.tag) + " outside [0, " + std::to_string(kMaxTag) +
                   "]");
  if (h.length > kMaxPayloadBytes)
    return r.Error("payload of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                   std::to_string(kMaxPayloadBytes));
  return h;
}

}  // namespace reel::tcp

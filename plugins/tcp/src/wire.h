// The tcp transport's wire format: pure encoders and decoders, no sockets, so that a fuzz target
// and the tests can call them on arbitrary bytes. Every decoder checks every field and returns
// InvalidArgument naming the field; none reads past the span it is given.
//
// All integers are little-endian. A connection carries one direction of one pair of ranks: the
// connecting rank writes, the accepting rank reads (a mesh of n ranks has n(n-1) connections).
//
// 1. Handshake (what it guards against: plugins/tcp/README.md, "Security"):
//      client -> server  Hello     144 bytes  "RLHe" u8 version u8 purpose u16 0
//                                             u32 rank u32 world_size  nonce_c[32]  job[32]
//                                             job_id[64]
//      server -> client  Challenge 176 bytes  "RLCh" u8 version u8 0 u16 0
//                                             u32 rank u32 world_size  nonce_s[32]  job[32]
//                                             job_id[64]  mac_s[32]
//      client -> server  Response   40 bytes  "RLRe" u8 version u8 0 u16 0  mac_c[32]
//    mac_s = HMAC(secret, "reel-tcp server" | Hello | Challenge[0..144)), mac_c = HMAC(secret,
//    "reel-tcp client" | Hello | Challenge), compared in constant time. `job`: the job nonce rank
//    0 hands a rank in the Challenge to its join (all zero before a rank joined a job).
//    `job_id`: the launch's job identity (reel/job_id.h), NUL-padded, all zero for none; each
//    side refuses the other's if it differs from its own, so a process of an earlier launch with
//    the same secret and port cannot join or host this one. Then the server answers with a
//    control message: Accept, or Refuse with the reason.
// 2. Control messages (handshake verdict, rendezvous):  "RLCo" u8 type u8 0 u16 0 u32 length,
//    then `length` (<= kMaxControlBody) bytes of body; see ControlType.
// 3. Data frames (after the handshake of a kData connection): a 24-byte header
//      "RLFr" u8 version u8 type u16 0  u32 source  u32 tag  u64 length
//    then `length` payload bytes. Heartbeats and goodbyes: tag and length 0. A failure notice:
//    the tag field carries the rank that failed, the payload (<= kMaxNoticeBytes) the reason. A
//    collective frame's tag field holds the native collective's sequence number (< 2^31), outside
//    every tag, so a leftover of a failed collective cannot match a later one (Mailbox).
#ifndef REEL_PLUGINS_TCP_SRC_WIRE_H_
#define REEL_PLUGINS_TCP_SRC_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/transport.h"

namespace reel::tcp {

// 2: collective frames; 3: machine ids in the rendezvous; 4: the job nonce in the handshake;
// 5: host ids in the rendezvous, and the hand-over of each host's shared memory once formed;
// 6: the launch's job identity in the handshake, the options that must agree in the join.
constexpr uint8_t kWireVersion = 6;
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
using Nonce = std::array<std::byte, kNonceBytes>;
using Mac = std::array<std::byte, kMacBytes>;

// ---- Handshake ----

enum class Purpose : uint8_t {
  kJoin = 1,  // a rank joins the rendezvous hosted by rank 0
  kData = 2,  // a rank's connection for sending messages to the accepting rank
};

struct Hello {
  Purpose purpose = Purpose::kData;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  Nonce nonce{};
  Nonce job{};           // the job this rank joined; all zero before it joined one
  std::string job_id{};  // the launch's identity (reel/job_id.h); empty: none
};
// Room for a job identity on the wire: kMaxJobIdBytes (reel/job_id.h).
constexpr size_t kJobIdBytes = 64;
constexpr size_t kHelloBytes = 144;
std::array<std::byte, kHelloBytes> EncodeHello(const Hello& h);
Result<Hello> DecodeHello(std::span<const std::byte> bytes);

struct Challenge {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  Nonce nonce{};
  Nonce job{};           // the server's job; all zero while it has none (a rank before its join)
  std::string job_id{};  // the server's launch identity; empty: none
  Mac mac{};
};
constexpr size_t kChallengeBytes = 176;
std::array<std::byte, kChallengeBytes> EncodeChallenge(const Challenge& c);
Result<Challenge> DecodeChallenge(std::span<const std::byte> bytes);

constexpr size_t kResponseBytes = 40;
std::array<std::byte, kResponseBytes> EncodeResponse(const Mac& mac);
Result<Mac> DecodeResponse(std::span<const std::byte> bytes);

// The MACs of the exchange above. `challenge` is the encoded challenge; its mac field is ignored
// for the server's MAC (which it is). Internal if OpenSSL fails (never a MAC of zeros, which a
// peer without the secret could send).
Result<Mac> ServerMac(std::string_view secret, std::span<const std::byte, kHelloBytes> hello,
                      std::span<const std::byte, kChallengeBytes> challenge);
Result<Mac> ClientMac(std::string_view secret, std::span<const std::byte, kHelloBytes> hello,
                      std::span<const std::byte, kChallengeBytes> challenge);
// Constant-time comparison (the time does not depend on where the MACs differ).
bool MacsEqual(const Mac& a, const Mac& b);
// kNonceBytes from the system's cryptographic random generator. Internal on failure.
Result<Nonce> FreshNonce();
// The name of a job identity in messages: itself, or "(none)".
std::string JobName(const std::string& job_id);
// True for the all-zero nonce (no job yet).
bool IsZero(const Nonce& n);
// The first bytes of a nonce in hex, to name a job in messages.
std::string ShortHex(const Nonce& n);

// ---- Control messages ----

enum class ControlType : uint8_t {
  kAccept = 1,    // handshake verdict: authenticated and admitted; empty body
  kRefuse = 2,    // handshake or rendezvous refused; body: the reason as text
  kJoin = 3,      // rank -> rank 0: where this rank accepts connections, its machine (Member)
  kProgress = 4,  // rank 0 -> joiners: which ranks have joined so far (RankSet)
  kTable = 5,     // rank 0 -> joiners: every rank's Member, in rank order (Table)
};
constexpr size_t kControlHeaderBytes = 12;
constexpr uint32_t kMaxControlBody = 1 << 20;

struct ControlHeader {
  ControlType type = ControlType::kAccept;
  uint32_t length = 0;
};
std::vector<std::byte> EncodeControl(ControlType type, std::span<const std::byte> body);
Result<ControlHeader> DecodeControlHeader(std::span<const std::byte> bytes);

// Where a rank accepts connections: a host (numeric address or name) and a port.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
};
constexpr size_t kMaxHostBytes = 255;

// A rank as the rendezvous knows it: where it accepts connections, the machine it runs on
// (an id that every process under one kernel shares, so that ranks can count the ranks that
// share their cores), and its options that every rank must share ("name=value" separated by
// ';', compared at the join: AgreedOptions()). Encoded as u16 port, u8 length + host, u8 length +
// machine, u8 length + options; each 1 to kMaxHostBytes printable characters without spaces.
struct Member {
  Endpoint endpoint;
  std::string machine;
  std::string options{};
  bool operator==(const Member&) const = default;
};
std::vector<std::byte> EncodeMember(const Member& m);
Result<Member> DecodeMember(std::span<const std::byte> body);

// A set of ranks as a bitmap over [0, world_size).
std::vector<std::byte> EncodeRankSet(const std::vector<bool>& ranks);
Result<std::vector<bool>> DecodeRankSet(std::span<const std::byte> body, uint32_t world_size);

// u32 count, then count members as above. The count must equal world_size.
std::vector<std::byte> EncodeTable(const std::vector<Member>& table);
Result<std::vector<Member>> DecodeTable(std::span<const std::byte> body, uint32_t world_size);

// ---- Data frames ----

enum class FrameType : uint8_t {
  kData = 1,
  kHeartbeat = 2,
  kGoodbye = 3,
  kPeerFailed = 4,
  kCollective = 5,
};
// Native collectives are numbered modulo 2^31 (the tag field of a collective frame).
constexpr uint32_t kCollectiveSeqMask = 0x7fffffff;
constexpr size_t kFrameHeaderBytes = 24;
// No frame's payload may exceed the largest message a Send takes (reel/transport.h); the
// native collectives' frames stay far below it (ring chunks of 256 KiB, agreements of at most
// allreduce_small_bytes <= 1 GiB of data, recursive doubling's messages of at most
// allreduce_doubling_bytes <= 1 GiB and a count). A larger length is a peer breaking the protocol,
// not a request to allocate or to read that much.
constexpr uint64_t kMaxPayloadBytes = kMaxMessageBytes;
constexpr uint64_t kMaxNoticeBytes = 4096;

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint32_t source = 0;
  uint32_t tag = 0;
  uint64_t length = 0;
};
std::array<std::byte, kFrameHeaderBytes> EncodeFrameHeader(const FrameHeader& h);
// Checks magic, version, type, reserved bits, tag <= kMaxTag (a collective's sequence number <=
// kCollectiveSeqMask) and length <= kMaxPayloadBytes,
// that heartbeats and goodbyes carry neither tag nor length, and notices at most kMaxNoticeBytes.
Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_WIRE_H_

// The wire of `reel launch --nnodes MIN:MAX`'s rendezvous (docs/distributed.md, "Restarts"):
// pure encoders and decoders, no sockets, so that tests can feed them any bytes.
//
// A frame is a u32 little-endian length (1..kMaxFrameBytes) and that many bytes: a u8 message
// type, then the type's fields, each a u16 little-endian length and its bytes. Every type has a
// fixed number of fields; a frame with another, an unknown type, a field past the frame's end or
// bytes after the last field is refused (InvalidArgument), and the connection with it.
//
// The conversation (server: the coordinator node's launcher; client: every launcher):
//   S: Challenge [protocol, nonce_s]      on accept
//   C: Hello [job_id, node, nonce_c, mac_c]  mac_c = HMAC-SHA256(REEL_SECRET, "client" ...)
//   S: Welcome [mac_s] or Refuse [reason]    the server proves it holds the secret too
//   C: Join [failure]           "" or what failed on this node: wants the next round
//   S: Assign [round, restarts, node_rank, nnodes, port, members]   the round closed
//   S: NewRound [round, why]    a round opened: stop the ranks and Join; and, every second, to a
//                               node waiting for its Assign, with the last closed round (nothing
//                               to stop): the rendezvous is alive (a silent one is lost)
//   S: Abort [reason]           the job ends (a round below MIN, --max-restarts spent)
//   C: Done []                  this node's ranks all exited 0
//   S: Finished []              the job ended well before this waiting node was admitted
#ifndef REEL_CORE_CLI_RENDEZVOUS_WIRE_H_
#define REEL_CORE_CLI_RENDEZVOUS_WIRE_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"

namespace reel::cli::rdzv {

constexpr size_t kMaxFrameBytes = 4096;
constexpr char kProtocol[] = "reel-rendezvous 1";

enum class MsgType : uint8_t {
  kChallenge = 1,
  kHello = 2,
  kWelcome = 3,
  kRefuse = 4,
  kJoin = 5,
  kAssign = 6,
  kNewRound = 7,
  kAbort = 8,
  kDone = 9,
  kFinished = 10,
};

struct Message {
  MsgType type = MsgType::kDone;
  std::vector<std::string> fields;
};

// The frame of `m`; fields longer than a frame allows are cut (only reasons and names can be).
std::string EncodeFrame(const Message& m);

// The first frame of `buffer`: nullopt while it is incomplete, else the message and, in
// `*consumed`, its size. InvalidArgument naming what is wrong for bytes that are no frame.
Result<std::optional<Message>> DecodeFrame(std::string_view buffer, size_t* consumed);

// 32 random bytes from the kernel, in hex. Unavailable when there are none.
Result<std::string> FreshNonceHex();

// HMAC-SHA256 in hex over role, both nonces, the job identity and the node's name, each
// NUL-terminated; "" when OpenSSL fails (never equal to a real MAC: SameMac refuses "").
std::string NodeMac(std::string_view secret, std::string_view role, std::string_view nonce_s,
                    std::string_view nonce_c, std::string_view job_id, std::string_view node);

// Constant-time comparison of two MACs in hex; false when either is empty.
bool SameMac(std::string_view a, std::string_view b);

// The first TCP socket (close-on-exec) of host:port's addresses ("[v6]" brackets stripped) that
// `use` accepts (connects, or binds and listens); -1 when none did, with the resolver's error or
// the last socket's errno text in `*error`. A rejected socket is closed here.
int FirstTcpSocket(const std::string& host, const std::string& port,
                   const std::function<bool(int fd, const sockaddr* addr, socklen_t len)>& use,
                   std::string* error);

}  // namespace reel::cli::rdzv

#endif  // REEL_CORE_CLI_RENDEZVOUS_WIRE_H_

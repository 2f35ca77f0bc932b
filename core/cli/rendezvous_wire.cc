// The rendezvous wire (see rendezvous_wire.h).
#include "rendezvous_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace reel::cli::rdzv {
namespace {

// How many fields each type carries; 0 for an unknown type (and for Done and Finished, which
// IsKnownType tells apart).
size_t FieldCount(MsgType t) {
  switch (t) {
    case MsgType::kChallenge:
      return 2;
    case MsgType::kHello:
      return 4;
    case MsgType::kWelcome:
    case MsgType::kRefuse:
    case MsgType::kJoin:
    case MsgType::kAbort:
      return 1;
    case MsgType::kAssign:
      return 6;
    case MsgType::kNewRound:
      return 2;
    case MsgType::kDone:
    case MsgType::kFinished:
      return 0;
  }
  return 0;
}

bool IsKnownType(uint8_t t) { return t >= 1 && t <= 10; }

std::string HexOf(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += {kDigits[bytes[i] >> 4], kDigits[bytes[i] & 15]};
  return out;
}

}  // namespace

std::string EncodeFrame(const Message& m) {
  std::string body(1, static_cast<char>(m.type));
  for (const std::string& f : m.fields) {
    const size_t room = kMaxFrameBytes - std::min(kMaxFrameBytes, body.size() + 2);
    const size_t n = std::min(f.size(), room);
    body += {static_cast<char>(n & 0xff), static_cast<char>(n >> 8)};
    body.append(f, 0, n);
  }
  const uint32_t len = static_cast<uint32_t>(body.size());
  std::string frame{static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                    static_cast<char>((len >> 16) & 0xff), static_cast<char>(len >> 24)};
  return frame + body;
}

Result<std::optional<Message>> DecodeFrame(std::string_view buffer, size_t* consumed) {
  if (buffer.size() < 4) return std::optional<Message>();
  const auto byte = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(buffer[i]));
  };
  const uint32_t len = byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
  if (len < 1 || len > kMaxFrameBytes)
    return InvalidArgumentError("rendezvous frame of " + std::to_string(len) + " bytes; 1 to " +
                                std::to_string(kMaxFrameBytes) + " are allowed");
  if (buffer.size() < 4 + len) return std::optional<Message>();
  const uint8_t type = static_cast<uint8_t>(buffer[4]);
  if (!IsKnownType(type))
    return InvalidArgumentError("rendezvous message of unknown type " + std::to_string(type));
  Message m;
  m.type = static_cast<MsgType>(type);
  size_t at = 5;
  const size_t end = 4 + len;
  while (at < end) {
    if (end - at < 2) return InvalidArgumentError("rendezvous field length cut off");
    const size_t n = byte(at) | byte(at + 1) << 8;
    at += 2;
    if (n > end - at) return InvalidArgumentError("rendezvous field runs past its frame");
    if (m.fields.size() == FieldCount(m.type))
      return InvalidArgumentError("rendezvous message of type " + std::to_string(type) +
                                  " with more than " + std::to_string(FieldCount(m.type)) +
                                  " field(s)");
    m.fields.emplace_back(buffer.substr(at, n));
    at += n;
  }
  if (m.fields.size() != FieldCount(m.type))
    return InvalidArgumentError("rendezvous message of type " + std::to_string(type) + " with " +
                                std::to_string(m.fields.size()) + " field(s), not " +
                                std::to_string(FieldCount(m.type)));
  *consumed = end;
  return std::optional<Message>(std::move(m));
}

Result<std::string> FreshNonceHex() {
  unsigned char bytes[32];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) return UnavailableError("cannot read /dev/urandom for a rendezvous nonce");
  return HexOf(bytes, sizeof bytes);
}

std::string NodeMac(std::string_view secret, std::string_view role, std::string_view nonce_s,
                    std::string_view nonce_c, std::string_view job_id, std::string_view node) {
  std::string data;
  for (std::string_view part : {role, nonce_s, nonce_c, job_id, node})
    data.append(part).push_back('\0');
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (::HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
             reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &n) == nullptr)
    return "";
  return HexOf(mac, n);
}

bool SameMac(std::string_view a, std::string_view b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

int FirstTcpSocket(const std::string& host, const std::string& port,
                   const std::function<bool(int fd, const sockaddr* addr, socklen_t len)>& use,
                   std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string bare =
      host.size() > 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
  if (int rc = ::getaddrinfo(bare.c_str(), port.c_str(), &hints, &found); rc != 0) {
    *error = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && !use(fd, a->ai_addr, a->ai_addrlen)) {
      *error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace reel::cli::rdzv

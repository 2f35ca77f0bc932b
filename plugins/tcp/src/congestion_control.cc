// The congestion control of sending connections (see congestion_control.h).
#include "congestion_control.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace reel::tcp {
namespace {

constexpr size_t kMaxNameBytes = 15;  // TCP_CA_NAME_MAX (16) with its terminating NUL

std::vector<std::string> Words(const char* path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "unknown" : out;
}

// The algorithms this kernel has, and those a process without CAP_NET_ADMIN may set; empty when
// the file cannot be read.
std::vector<std::string> AvailableCongestionControls() {
  return Words("/proc/sys/net/ipv4/tcp_available_congestion_control");
}
std::vector<std::string> AllowedCongestionControls() {
  return Words("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
}

}  // namespace

CongestionChoice ChooseCongestionControl(const std::string& option, bool loopback,
                                         const std::string& current) {
  if (option == kSystemCongestionControl)
    return {"", "sending connections keep the system's TCP congestion control (" + current +
                    ") (congestion_control=system)"};
  if (!option.empty())
    return {option, "sending connections use TCP congestion control " + option +
                        " (congestion_control=" + option + ")"};
  if (loopback && current == "bbr")
    return {kLoopbackCongestionControl,
            std::string("sending connections on loopback use TCP congestion control ") +
                kLoopbackCongestionControl +
                " instead of the system's bbr, whose pacing only delays bytes there (automatic; "
                "congestion_control=system keeps bbr)"};
  return {"", "sending connections keep the system's TCP congestion control (" + current +
                  ") (automatic: " + (loopback ? "it does not pace" : "not loopback") + ")"};
}

Status CheckCongestionControlOption(const std::string& option) {
  if (option.empty() || option == kSystemCongestionControl) return Status::Ok();
  const std::string what = "tcp option 'congestion_control': '" + option + "' ";
  const bool name_like =
      option.size() <= kMaxNameBytes && std::all_of(option.begin(), option.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (!name_like)
    return InvalidArgumentError(what + "is not the name of a congestion control algorithm (e.g. " +
                                kLoopbackCongestionControl + "; or '" + kSystemCongestionControl +
                                "', or empty for the automatic choice)");
  const std::vector<std::string> available = AvailableCongestionControls();
  if (!available.empty() &&
      std::find(available.begin(), available.end(), option) == available.end())
    return InvalidArgumentError(
        what + "is not available in this kernel (it has: " + Joined(available) + ")");
  return Status::Ok();
}

Result<std::string> CongestionControlOf(tcp::socket& socket) {
  char name[kMaxNameBytes + 1] = {};
  socklen_t length = sizeof name;
  if (getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0)
    return UnavailableError(std::string("reading the TCP congestion control failed: ") +
                            std::strerror(errno));
  return std::string(name, strnlen(name, std::min<size_t>(length, sizeof name)));
}

Status SetCongestionControl(tcp::socket& socket, const std::string& algorithm) {
  if (setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_CONGESTION, algorithm.data(),
                 static_cast<socklen_t>(algorithm.size())) == 0)
    return Status::Ok();
  const int error = errno;
  std::string why =
      "the kernel refused TCP congestion control '" + algorithm + "': " + std::strerror(error);
  if (error == EPERM)
    why += " (without CAP_NET_ADMIN a process may use only " + Joined(AllowedCongestionControls()) +
           ": net.ipv4.tcp_allowed_congestion_control)";
  return InvalidArgumentError(why);
}

}  // namespace reel::tcp

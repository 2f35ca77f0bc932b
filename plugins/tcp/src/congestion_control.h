// The TCP congestion control of a rank's sending connections (each connection carries one
// direction, so the algorithm of the side that opened it decides how its bytes go out).
//
// On loopback there is no link to share and no queue to keep short, yet BBR, a common system
// default, paces every connection by its estimate of the bottleneck's rate (TCP's own pacing
// timer, without the fq qdisc). With reno on reel's sending connections instead, reel tcp's
// AllReduce ran 1.1-1.5x faster at 1-16 MiB on 2 and 3 ranks on loopback (bench/RESULTS.md).
// So, unless told otherwise, a sending connection to a loopback address that would use bbr uses
// reno; every other connection keeps the system's choice (between hosts, BBR's pacing is what the
// administrator chose it for).
#ifndef REEL_PLUGINS_TCP_SRC_CONGESTION_CONTROL_H_
#define REEL_PLUGINS_TCP_SRC_CONGESTION_CONTROL_H_

#include <string>

#include "asio.h"
#include "reel/status.h"

namespace reel::tcp {

// The algorithm the automatic choice uses on loopback instead of a pacing one. Every Linux kernel
// has reno built in and allows it without privileges.
inline constexpr char kLoopbackCongestionControl[] = "reno";
// The value of the option `congestion_control` that leaves every connection as the system has it.
inline constexpr char kSystemCongestionControl[] = "system";

struct CongestionChoice {
  std::string algorithm;  // what to set; empty: leave the connection's own
  std::string why;        // for the log
};

// `option`: the option congestion_control ("" automatic, "system", or an algorithm's name);
// `loopback`: the connection's peer is a loopback address; `current`: the connection's algorithm
// now (the system's default for a new connection).
CongestionChoice ChooseCongestionControl(const std::string& option, bool loopback,
                                         const std::string& current);

// InvalidArgument naming the option unless `option` is "", "system", or an algorithm's name this
// kernel has (when it can tell).
Status CheckCongestionControlOption(const std::string& option);

// The algorithm of a connected or open socket (TCP_CONGESTION).
Result<std::string> CongestionControlOf(tcp::socket& socket);
// Sets it; InvalidArgument naming the algorithm, and those allowed, when the kernel refuses.
Status SetCongestionControl(tcp::socket& socket, const std::string& algorithm);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_CONGESTION_CONTROL_H_

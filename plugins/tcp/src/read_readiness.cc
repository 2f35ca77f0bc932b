#include "read_readiness.h"

#include <sys/socket.h>

#include <limits>

namespace reel::tcp {
namespace {

bool SetLowWaterMark(int fd, int bytes) {
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes) == 0;
}

}  // namespace

// The kernel caps the mark (read_readiness.h): asking for the most keeps the cap its business.
bool MuteReadReadiness(int fd) { return SetLowWaterMark(fd, std::numeric_limits<int>::max()); }

bool UnmuteReadReadiness(int fd) { return SetLowWaterMark(fd, 1); }

}  // namespace reel::tcp

// This host's name, read once: what the file storage's temporary names and TensorBoard's event
// file names carry. "localhost" if the host has none.
#ifndef REEL_CORE_SRC_HOST_NAME_H_
#define REEL_CORE_SRC_HOST_NAME_H_

#include <unistd.h>

#include <string>

namespace reel::core {

inline const std::string& HostName() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return std::string("localhost");
    return std::string(buf);
  }();
  return name;
}

}  // namespace reel::core

#endif  // REEL_CORE_SRC_HOST_NAME_H_

#include "component_flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

namespace reel::cli {
namespace {

// A registry transport as a std::unique_ptr<Transport> (Owned keeps its library loaded).
class RegistryTransport final : public Transport {
 public:
  explicit RegistryTransport(core::Owned<Transport> t) : t_(std::move(t)) {}
  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx, Deadline d) override {
    return t_->Connect(ctx, d);
  }

 private:
  core::Owned<Transport> t_;
};

}  // namespace

Status ParseFeatureFlag(const std::string& flag, core::ConformanceOptions& options) {
  const size_t eq = flag.find('=');
  long long width = 0, frames = 1;
  char tail = 0;
  const std::string spec = eq == std::string::npos ? "" : flag.substr(eq + 1);
  const int n = std::sscanf(spec.c_str(), "%lldx%lld%c", &width, &frames, &tail);
  if (eq == 0 || eq == std::string::npos || n < 1 || n > 2 || width < 1 || frames < 1)
    return InvalidArgumentError("--feature " + flag + ": expected NAME=WIDTH or NAME=WIDTHxFRAMES");
  options.features[flag.substr(0, eq)] = {width, frames};
  return Status::Ok();
}

Status ParseComponentOptionFlag(
    const std::string& flag, std::map<std::string, std::map<std::string, std::string>>& options) {
  const size_t dot = flag.find('.'), eq = flag.find('=');
  if (dot == 0 || dot == std::string::npos || eq == std::string::npos || eq < dot + 2)
    return InvalidArgumentError("--option " + flag + ": expected COMPONENT.KEY=VALUE");
  options[flag.substr(0, dot)][flag.substr(dot + 1, eq - dot - 1)] = flag.substr(eq + 1);
  return Status::Ok();
}

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

TransportMaker::TransportMaker(const core::Registry& registry, const core::ComponentEntry& entry,
                               std::map<std::string, std::string> options)
    : registry_(registry), entry_(entry), options_(std::move(options)) {
  for (const OptionSpec& o : entry.info.options) named_groups_ |= o.name == "world";
  named_groups_ &= !options_.count("world");
}

Result<TransportMaker::Made> TransportMaker::Make() {
  std::map<std::string, std::string> opts = options_;
  if (named_groups_) opts["world"] = "reel-cli-" + std::to_string((*groups_)++);
  REEL_ASSIGN_OR_RETURN(core::Owned<Transport> t,
                        registry_.CreateTransport(entry_.info.name, opts));
  return Made{std::make_unique<RegistryTransport>(std::move(t)),
              "127.0.0.1:" + std::to_string(FreeLoopbackPort())};
}

}  // namespace reel::cli

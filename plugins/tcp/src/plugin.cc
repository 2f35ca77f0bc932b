// The tcp plugin: the `tcp` transport.
#include "reel/plugin.h"

#include "tcp_transport.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Transport>(
      {"tcp",
       "ranks in separate processes or hosts: rendezvous at REEL_COORDINATOR, a full TCP mesh, "
       "HMAC-authenticated connections, heartbeats",
       reel::tcp::TcpOptionSchema()},
      [](const reel::Options& o) -> reel::Result<std::unique_ptr<reel::Transport>> {
        REEL_ASSIGN_OR_RETURN(reel::tcp::TcpOptions options, reel::tcp::TcpOptionsFrom(o));
        return reel::tcp::MakeTcpTransport(std::move(options));
      });
}

}  // namespace

REEL_PLUGIN("tcp", "0.1.0", "TCP transport: processes and hosts as ranks (Boost.Asio, OpenSSL)",
            Register)

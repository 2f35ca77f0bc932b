// The transport template's own test: two ranks on two threads form a group and exchange a
// message each way; a receive with nothing to come ends at its deadline, naming peer and tag.
// usage: transport_plugin_test PATH/TO/libreel_template_transport.so
#include <chrono>
#include <cstdio>
#include <thread>

#include "reel/core/host.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]), 2;
  auto host = reel::core::Host::Create({.plugin_files = {argv[1]}, .load_plugins = false});
  if (!host.ok()) return std::fprintf(stderr, "%s\n", host.status().ToString().c_str()), 1;
  auto transport = (*host)->registry().CreateTransport("template_local", {});
  if (!transport.ok()) return 1;
  const auto deadline = reel::DeadlineIn(std::chrono::seconds(10));
  std::unique_ptr<reel::Communicator> comms[2];
  auto join = [&](int rank) {
    auto c = (*transport)->Connect({rank, 2, "test"}, deadline);
    if (c.ok()) comms[rank] = std::move(*c);
  };
  std::thread other(join, 1);
  join(0);
  other.join();
  if (!comms[0] || !comms[1]) return std::puts("the group did not form"), 1;
  const std::byte ping[] = {std::byte{42}};
  if (!comms[0]->Send(1, 5, ping, deadline).ok() || !comms[1]->Send(0, 6, ping, deadline).ok())
    return 1;
  auto at1 = comms[1]->Recv(0, 5, deadline);
  auto at0 = comms[0]->Recv(reel::kAnySource, 6, deadline);
  if (!at1.ok() || !at0.ok() || at1->payload.size() != 1 || at0->source != 1) return 1;
  auto none = comms[0]->Recv(1, 7, reel::DeadlineIn(std::chrono::milliseconds(50)));
  std::printf("exchanged; nothing more: %s\n", none.status().ToString().c_str());
  return none.status().code() == reel::StatusCode::kDeadlineExceeded ? 0 : 1;
}

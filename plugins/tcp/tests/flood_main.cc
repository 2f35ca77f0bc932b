// reel_tcp_flood: the hostile process of the tests that attack whole runs (a `reel launch` on
// loopback, tests/e2e/launch_hostile_test.cc; hosts in network namespaces,
// tests/netns/tcp_hostile_netns.sh). Each argument HOST:PORT:KIND:N holds N connections of KIND
// (silent, slowloris, random_bytes, oversized_length: flood.h) open to HOST:PORT, opening a new
// one whenever the listener closes one, until SIGTERM or SIGINT. With --status FILE it rewrites
// FILE every 100 ms, and at the end stdout gets, one line per argument:
//   HOST:PORT KIND N opened O cut C
// (O connections the listener accepted, C of them it closed). Exit status 0, 2 for bad arguments.
// Only for the tests: it sends to the addresses it is given and nowhere else.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "flood.h"

namespace {

using reel::tcp::testing::Flood;

struct Spec {
  std::string host, text;
  uint16_t port = 0;
  Flood::Kind kind = Flood::Kind::kSilent;
  int connections = 0;
};

bool Parse(const std::string& arg, Spec* spec) {
  // HOST:PORT:KIND:N, HOST without colons (IPv4 or a name).
  std::vector<std::string> parts;
  std::stringstream in(arg);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  if (parts.size() != 4) return false;
  spec->host = parts[0];
  spec->text = parts[0] + ":" + parts[1];
  char* end = nullptr;
  const long port = std::strtol(parts[1].c_str(), &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) return false;
  spec->port = static_cast<uint16_t>(port);
  bool known = false;
  for (Flood::Kind k : {Flood::Kind::kSilent, Flood::Kind::kSlowloris, Flood::Kind::kRandomBytes,
                        Flood::Kind::kOversizedLength})
    if (parts[2] == Flood::Name(k)) spec->kind = k, known = true;
  const long n = std::strtol(parts[3].c_str(), &end, 10);
  if (!known || *end != '\0' || n < 1 || n > 100000) return false;
  spec->connections = static_cast<int>(n);
  return true;
}

std::string Report(const std::vector<Spec>& specs, const std::vector<std::unique_ptr<Flood>>& f) {
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i)
    out += specs[i].text + " " + Flood::Name(specs[i].kind) + " " +
           std::to_string(specs[i].connections) + " opened " + std::to_string(f[i]->opened()) +
           " cut " + std::to_string(f[i]->cut()) + "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string status;
  std::vector<Spec> specs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--status") == 0 && i + 1 < argc) {
      status = argv[++i];
      continue;
    }
    Spec s;
    if (!Parse(argv[i], &s)) {
      std::cerr << "usage: reel_tcp_flood [--status FILE] HOST:PORT:KIND:N...  (KIND: silent, "
                   "slowloris, random_bytes, oversized_length); bad: "
                << argv[i] << "\n";
      return 2;
    }
    specs.push_back(s);
  }
  if (specs.empty()) {
    std::cerr << "reel_tcp_flood: nothing to flood\n";
    return 2;
  }
  // The floods' threads inherit the blocked signals: only sigtimedwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::vector<std::unique_ptr<Flood>> floods;
  for (const Spec& s : specs)
    floods.push_back(std::make_unique<Flood>(s.port, s.connections, s.kind, s.host));
  const timespec tick{0, 100'000'000};
  while (sigtimedwait(&stop, nullptr, &tick) < 0) {
    if (status.empty()) continue;
    const std::string tmp = status + ".tmp";
    std::ofstream(tmp) << Report(specs, floods);
    std::rename(tmp.c_str(), status.c_str());
  }
  const std::string report = Report(specs, floods);
  floods.clear();
  std::cout << report << std::flush;
  return 0;
}

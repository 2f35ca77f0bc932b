// The choice of how AllReduce waits (see allreduce_waiting.h).
#include "allreduce_waiting.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace reel::tcp {
namespace {

std::string Polling(std::chrono::microseconds spin, bool yield) {
  return std::string("AllReduce waits by polling") + (yield ? " and yielding its core" : "") +
         " (for up to " + std::to_string(spin.count()) + " us once nothing moves, then sleeps)";
}

// Printable, without spaces, as the rendezvous requires; "" when nothing usable is left.
std::string Printable(std::string s) {
  std::erase_if(s, [](char c) { return c <= ' ' || c > '~'; });
  if (s.size() > 240) s.resize(240);  // room for the prefix below
  return s;
}

}  // namespace

AllReduceWaiting ChooseAllReduceWaiting(std::optional<std::chrono::microseconds> option,
                                        int ranks_on_host, int cores) {
  const bool oversubscribed = ranks_on_host > cores;  // polling yields, or sleeps instead
  const std::string counts = std::to_string(ranks_on_host) +
                             " rank(s) of the group on this host, " + std::to_string(cores) +
                             " core(s) for this rank";
  if (option) {
    const std::string given = " (allreduce_spin_us=" + std::to_string(option->count()) + ")";
    if (option->count() == 0) return {*option, false, "AllReduce waits by sleeping" + given};
    return {*option, oversubscribed,
            Polling(*option, oversubscribed) + given + (oversubscribed ? " (" + counts + ")" : "")};
  }
  if (!oversubscribed)
    return {kAutomaticSpin, false,
            Polling(kAutomaticSpin, false) + " (automatic: " + counts +
                "; allreduce_spin_us=0 sleeps)"};
  return {std::chrono::microseconds(0), false,
          "AllReduce waits by sleeping (automatic: " + counts +
              ", so polling would take the cores the others need; allreduce_spin_us=N polls, "
              "yielding its core)"};
}

std::chrono::microseconds SpinNow(const AllReduceWaiting& chosen, bool option_given,
                                  bool compute_alongside) {
  return compute_alongside && !option_given ? std::chrono::microseconds(0) : chosen.spin;
}

std::string MachineId() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot && std::getline(boot, id) && !(id = Printable(id)).empty()) return "boot:" + id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0 && !(id = Printable(host)).empty())
    return "host:" + id;
  return "host:unknown";
}

std::string HostId(const std::string& host_id) {
  if (!host_id.empty()) return MachineId() + "/id:" + host_id;
  struct stat net {};
  if (stat("/proc/self/ns/net", &net) != 0) return MachineId() + "/net:unknown";
  return MachineId() + "/net:" + std::to_string(net.st_ino);
}

std::string MachineOf(const std::string& host) { return host.substr(0, host.find('/')); }

}  // namespace reel::tcp

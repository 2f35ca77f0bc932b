// The tcp Transport: options and the factory (see tcp_transport.h).
#include "tcp_transport.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "congestion_control.h"
#include "reel/job_id.h"
#include "tcp_communicator.h"

namespace reel::tcp {
namespace {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TcpOptions options) : options_(std::move(options)) {}
  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                Deadline deadline) override {
    return TcpCommunicator::Connect(options_, ctx, deadline);
  }

 private:
  const TcpOptions options_;
};

constexpr int64_t kMaxAllReduceSpinUs = 1000000;  // a second of busy waiting is plenty
// Each pending handshake holds a descriptor; far below the usual limit of open files.
constexpr int64_t kMaxPendingHandshakes = 100000;

Result<std::chrono::milliseconds> Milliseconds(const Options& o, const char* name, int64_t min) {
  const int64_t v = o.GetInt(name);
  if (v < min)
    return InvalidArgumentError("tcp option '" + std::string(name) + "': " + std::to_string(v) +
                                " ms is below the minimum of " + std::to_string(min));
  return std::chrono::milliseconds(v);
}

}  // namespace

OptionSchema TcpOptionSchema() {
  return {
      StringOption("listen_address", "",
                   "address this rank accepts peers on (IP or host name; 0.0.0.0 or :: for every "
                   "interface); empty: the address it reaches the coordinator from, i.e. loopback "
                   "when the coordinator is local. Rank 0 listens on the coordinator's port"),
      IntOption("listen_port", 0, "port of ranks other than 0; 0 picks a free one"),
      StringOption("secret", "",
                   "shared secret that authenticates every connection (HMAC-SHA256, both ways); "
                   "empty: $REEL_SECRET. Required unless every rank listens on loopback"),
      StringOption("job_id", "",
                   "this launch's job identity; a process of another (e.g. an earlier run's "
                   "coordinator with the same secret and port) is refused in every handshake. "
                   "Empty: $REEL_JOB_ID, set by reel launch, else SLURM_JOB_ID.SLURM_STEP_ID, "
                   "else none"),
      IntOption("heartbeat_ms", 1000, "a connection idle this long carries a heartbeat"),
      IntOption("heartbeat_timeout_ms", 15000,
                "a peer silent this long is unavailable (its failure is reported on every rank)"),
      IntOption("handshake_timeout_ms", 5000,
                "time a new connection has to authenticate before it is dropped"),
      IntOption("max_pending_handshakes", 128,
                "connections a rank's listener lets authenticate at once; one more sheds the "
                "oldest silent one of the address with the most (a rank whose handshake is shed "
                "retries until its connect deadline)"),
      IntOption("allreduce_spin_us", -1,
                "how long AllReduce keeps polling its sockets without sleeping when nothing moves "
                "(busy waiting, as MPI does; yielding the core between polls when the group's "
                "ranks on this host outnumber the cores this rank may use). -1: automatic, as "
                "Open MPI decides: it polls for 20000 us where the group's ranks on this host "
                "are no more than those cores, else sleeps at once; 0: it sleeps at once"),
      IntOption("allreduce_small_bytes", 65536,
                "an AllReduce of at most this many bytes times (ranks - 1) sends its data with "
                "the ranks' agreement on its arguments and reduces every rank's data itself, "
                "instead of agreeing first and running the ring; 0: always the ring"),
      IntOption("allreduce_doubling_bytes", static_cast<int64_t>(TcpOptions::kDefaultDoublingBytes),
                "an AllReduce of at most this many bytes (32 times as many between 2 ranks, "
                "or 2 hosts) that allreduce_small_bytes does not cover reduces by recursive "
                "doubling (log2(ranks) exchanges of the whole buffer) instead of the ring "
                "(2(ranks-1) steps), across hosts where the layout is hierarchical; 0: always "
                "the ring. 0 to 2^30"),
      StringOption("allreduce_layout", "auto",
                   "how AllReduce runs: 'hierarchical': the ranks of each host reduce through "
                   "shared memory and one rank per host runs the ring across hosts; 'flat': one "
                   "ring of every rank over TCP; 'auto': hierarchical where some host runs more "
                   "than one rank and every such host could set up its shared memory, else flat"),
      StringOption("host_id", "",
                   "this rank's host for AllReduce's layout: ranks with the same id share memory "
                   "(they must run under one kernel and network namespace). Empty: detected "
                   "(the kernel's boot id and the network namespace)"),
      StringOption("congestion_control", "",
                   "TCP congestion control of this rank's sending connections. Empty: automatic, "
                   "reno instead of the system's bbr on loopback (bbr's pacing only delays bytes "
                   "there), the system's elsewhere; 'system': the system's everywhere; or an "
                   "algorithm this kernel has (e.g. reno, cubic, bbr) on every connection"),
      IntOption("receive_budget_bytes",
                static_cast<int64_t>(TcpOptions::kDefaultReceiveBudgetBytes),
                "bytes of one peer's messages that may wait for a receive to ask for them "
                "(the part of one still arriving included); past it this rank reads that peer "
                "only into receives that wait (TCP flow control then slows the sender) until a "
                "receive takes some. At most this plus 512 KiB waits per peer. 4096 to 2^40"),
  };
}

Result<TcpOptions> TcpOptionsFrom(const Options& o) {
  TcpOptions t;
  t.listen_address = o.GetString("listen_address");
  const int64_t port = o.GetInt("listen_port");
  if (port < 0 || port > 65535)
    return InvalidArgumentError("tcp option 'listen_port': " + std::to_string(port) +
                                " outside [0, 65535]");
  t.listen_port = static_cast<int>(port);
  t.secret = o.GetString("secret");
  if (t.secret.empty())
    if (const char* env = std::getenv("REEL_SECRET")) t.secret = env;
  t.job_id = o.GetString("job_id");
  if (t.job_id.empty()) {
    REEL_ASSIGN_OR_RETURN(t.job_id,
                          JobIdFromEnvironment([](const char* name) { return std::getenv(name); }));
  } else {
    REEL_RETURN_IF_ERROR(CheckJobId(t.job_id, "tcp option 'job_id'"));
  }
  REEL_ASSIGN_OR_RETURN(t.heartbeat, Milliseconds(o, "heartbeat_ms", 1));
  REEL_ASSIGN_OR_RETURN(t.heartbeat_timeout, Milliseconds(o, "heartbeat_timeout_ms", 1));
  REEL_ASSIGN_OR_RETURN(t.handshake_timeout, Milliseconds(o, "handshake_timeout_ms", 1));
  const int64_t pending = o.GetInt("max_pending_handshakes");
  if (pending < 1 || pending > kMaxPendingHandshakes)
    return InvalidArgumentError("tcp option 'max_pending_handshakes': " + std::to_string(pending) +
                                " outside [1, " + std::to_string(kMaxPendingHandshakes) + "]");
  t.max_pending_handshakes = static_cast<int>(pending);
  const int64_t spin = o.GetInt("allreduce_spin_us");
  if (spin < -1 || spin > kMaxAllReduceSpinUs)
    return InvalidArgumentError("tcp option 'allreduce_spin_us': " + std::to_string(spin) +
                                " outside [0, " + std::to_string(kMaxAllReduceSpinUs) +
                                "] (or -1: automatic)");
  if (spin >= 0) t.allreduce_spin = std::chrono::microseconds(spin);
  const int64_t small = o.GetInt("allreduce_small_bytes");
  if (small < 0 || small > (int64_t{1} << 30))
    return InvalidArgumentError("tcp option 'allreduce_small_bytes': " + std::to_string(small) +
                                " is outside [0, 1073741824]");
  t.allreduce_small_bytes = static_cast<size_t>(small);
  const int64_t doubling = o.GetInt("allreduce_doubling_bytes");
  if (doubling < 0 || doubling > (int64_t{1} << 30))
    return InvalidArgumentError("tcp option 'allreduce_doubling_bytes': " +
                                std::to_string(doubling) + " is outside [0, 1073741824]");
  t.allreduce_doubling_bytes = static_cast<size_t>(doubling);
  const int64_t budget = o.GetInt("receive_budget_bytes");
  if (budget < static_cast<int64_t>(TcpOptions::kMinReceiveBudgetBytes) ||
      budget > static_cast<int64_t>(TcpOptions::kMaxReceiveBudgetBytes))
    return InvalidArgumentError("tcp option 'receive_budget_bytes': " + std::to_string(budget) +
                                " is outside [" +
                                std::to_string(TcpOptions::kMinReceiveBudgetBytes) + ", " +
                                std::to_string(TcpOptions::kMaxReceiveBudgetBytes) +
                                "] (0 would stop reading every peer; the default is " +
                                std::to_string(TcpOptions::kDefaultReceiveBudgetBytes) + ")");
  t.receive_budget_bytes = static_cast<uint64_t>(budget);
  const std::string layout = o.GetString("allreduce_layout");
  if (layout == "auto") {
    t.allreduce_layout = TcpOptions::Layout::kAuto;
  } else if (layout == "flat") {
    t.allreduce_layout = TcpOptions::Layout::kFlat;
  } else if (layout == "hierarchical") {
    t.allreduce_layout = TcpOptions::Layout::kHierarchical;
  } else {
    return InvalidArgumentError("tcp option 'allreduce_layout': '" + layout +
                                "' is none of auto, flat, hierarchical");
  }
  t.host_id = o.GetString("host_id");
  if (t.host_id.size() > 64 ||
      std::any_of(t.host_id.begin(), t.host_id.end(), [](char c) { return c <= ' ' || c > '~'; }))
    return InvalidArgumentError("tcp option 'host_id': '" + t.host_id +
                                "' is not 1 to 64 printable characters without spaces");
  t.congestion_control = o.GetString("congestion_control");
  REEL_RETURN_IF_ERROR(CheckCongestionControlOption(t.congestion_control));
  if (t.heartbeat_timeout <= t.heartbeat)
    return InvalidArgumentError(
        "tcp option 'heartbeat_timeout_ms' (" + std::to_string(t.heartbeat_timeout.count()) +
        ") must exceed 'heartbeat_ms' (" + std::to_string(t.heartbeat.count()) + ")");
  return t;
}

std::string AgreedOptions(const TcpOptions& options) {
  const char* layout = options.allreduce_layout == TcpOptions::Layout::kFlat ? "flat"
                       : options.allreduce_layout == TcpOptions::Layout::kHierarchical
                           ? "hierarchical"
                           : "auto";
  return std::string("allreduce_layout=") + layout +
         ";allreduce_small_bytes=" + std::to_string(options.allreduce_small_bytes) +
         ";allreduce_doubling_bytes=" + std::to_string(options.allreduce_doubling_bytes);
}

std::string OptionsDisagreement(const std::string& mine, int my_rank, const std::string& theirs,
                                int their_rank) {
  if (mine == theirs) return "";
  // name -> value of one side's "name=value;..."
  auto parse = [](const std::string& text) {
    std::map<std::string, std::string> out;
    for (size_t at = 0; at <= text.size();) {
      size_t end = text.find(';', at);
      if (end == std::string::npos) end = text.size();
      const std::string item = text.substr(at, end - at);
      const size_t eq = item.find('=');
      out[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
      at = end + 1;
    }
    return out;
  };
  const auto a = parse(mine), b = parse(theirs);
  std::set<std::string> names;
  for (const auto& [name, value] : a) names.insert(name);
  for (const auto& [name, value] : b) names.insert(name);
  std::string out;
  for (const std::string& name : names) {
    const auto x = a.find(name), y = b.find(name);
    const std::string mine_value = x == a.end() ? "(not known)" : x->second;
    const std::string their_value = y == b.end() ? "(not known)" : y->second;
    if (mine_value == their_value) continue;
    out += (out.empty() ? "" : "; ") + std::string("tcp option '") + name + "' is '" + their_value +
           "' on rank " + std::to_string(their_rank) + " but '" + mine_value + "' on rank " +
           std::to_string(my_rank);
  }
  return out + " (it must be the same on every rank)";
}

std::unique_ptr<Transport> MakeTcpTransport(TcpOptions options) {
  return std::make_unique<TcpTransport>(std::move(options));
}

}  // namespace reel::tcp

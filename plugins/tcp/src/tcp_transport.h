// The tcp transport: ranks in separate processes or hosts, a full mesh of TCP connections formed
// through a rendezvous at rank 0 (torchrun style), every connection authenticated both ways with
// a shared secret. See README.md for the user's view and wire.h for the protocol.
#ifndef REEL_PLUGINS_TCP_SRC_TCP_TRANSPORT_H_
#define REEL_PLUGINS_TCP_SRC_TCP_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "reel/options.h"
#include "reel/transport.h"

namespace reel::tcp {

struct TcpOptions {
  // Where this rank accepts connections. Empty: the address this host uses to reach the
  // coordinator (loopback when the coordinator is local); "0.0.0.0" or "::": every interface,
  // advertising that same address. Rank 0 listens on the coordinator's port.
  std::string listen_address;
  int listen_port = 0;  // ranks other than 0; 0 = any free port
  std::string secret;   // the shared secret; REEL_SECRET when the option is not given
  // The launch's job identity (reel/job_id.h: REEL_JOB_ID, else Slurm's job and step, when the
  // option is not given): every handshake refuses a process of another. Empty: none.
  std::string job_id;
  std::chrono::milliseconds heartbeat{1000};           // a peer idle this long is sent a heartbeat
  std::chrono::milliseconds heartbeat_timeout{15000};  // a peer silent this long has failed
  std::chrono::milliseconds handshake_timeout{5000};   // for a connection to authenticate
  // At most this many connections of a listener may be authenticating at once; one more sheds
  // one of them (admission.h), so a flood cannot keep the group's ranks out.
  int max_pending_handshakes = 128;
  // Connections dropped before they authenticated are reported in one line per this interval.
  std::chrono::milliseconds drop_report_interval{10000};
  // A rank waiting for the coordinator (or a peer's listener) says so this often.
  std::chrono::milliseconds waiting_report_interval{10000};
  // How long AllReduce keeps polling its sockets without sleeping once nothing moves (0: it
  // sleeps in poll() at once). Unset: chosen when the group forms, polling only when the ranks
  // on this host fit its cores (allreduce_waiting.h). Busy waiting pays only with a core per rank.
  std::optional<std::chrono::microseconds> allreduce_spin;
  // An AllReduce whose data, times the other ranks, is at most this many bytes sends its data
  // with its arguments (the agreement's messages) and reduces every rank's here, instead of
  // agreeing first and then running the ring: one round (on 2 ranks) instead of three. 0: never.
  size_t allreduce_small_bytes = size_t{64} << 10;
  // An AllReduce of at most this many bytes (kDoublingPairFactor times as many where 2 ranks or
  // 2 hosts' leaders exchange) that the agreement did not already reduce reduces by recursive
  // doubling (allreduce_doubling.cc) instead of the ring, over every rank or, where the layout is
  // hierarchical, over the hosts' leaders. 0: never.
  size_t allreduce_doubling_bytes = kDefaultDoublingBytes;
  static constexpr size_t kDefaultDoublingBytes = size_t{32} << 10;
  static constexpr size_t kDoublingPairFactor = 32;
  // How AllReduce runs (host_allreduce.cc). kAuto: where some host runs more than one rank, the
  // ranks of a host reduce through shared memory and one rank per host runs the ring across
  // hosts (kHierarchical); else, or if a host's shared memory cannot be set up, the ring of every
  // rank (kFlat). kHierarchical fails the group's forming when shared memory cannot be set up.
  enum class Layout { kAuto, kFlat, kHierarchical };
  Layout allreduce_layout = Layout::kAuto;
  // This rank's host for AllReduce's layout: ranks with the same one share memory. Empty: the
  // kernel's boot id and the network namespace (so simulated hosts in namespaces are hosts).
  std::string host_id;
  // The TCP congestion control of this rank's sending connections: empty, automatic (reno instead
  // of bbr on loopback, the system's elsewhere; congestion_control.h); "system": the system's
  // everywhere; else that algorithm on every one.
  std::string congestion_control;
  // Bytes of one peer's messages that this rank may hold for receives that have not asked for
  // them yet (complete ones, the part of one still arriving, a part handed back by a receive that
  // gave up). Past it no read path (the io thread, a receive or AllReduce reading a connection
  // itself) reads that peer's next bytes unless they go straight into a waiting receive, so
  // TCP's flow control slows the sender instead of this rank's memory growing: at most the
  // budget plus one read's chunk (Mailbox::kChunkBytes) is held per peer, and a part handed
  // back by a receive that gave up.
  uint64_t receive_budget_bytes = kDefaultReceiveBudgetBytes;
  static constexpr uint64_t kDefaultReceiveBudgetBytes = uint64_t{256} << 20;
  // The option's range: below a page it would stop reading at every message (a figure meant in
  // MiB?); above 1 TiB it bounds nothing on any machine this runs on.
  static constexpr uint64_t kMinReceiveBudgetBytes = 4096;
  static constexpr uint64_t kMaxReceiveBudgetBytes = uint64_t{1} << 40;
};

// The options every rank of a group must share, as "name=value;...", sent with each rank's join
// and compared by the coordinator (a rank whose AllReduce runs another algorithm would fall out of
// step with the others at its first call).
std::string AgreedOptions(const TcpOptions& options);
// Empty if `theirs` (rank `their_rank`'s AgreedOptions) equals `mine` (rank `my_rank`'s), else
// which option differs, naming both values and ranks.
std::string OptionsDisagreement(const std::string& mine, int my_rank, const std::string& theirs,
                                int their_rank);

OptionSchema TcpOptionSchema();
// InvalidArgument naming the option for values out of range.
Result<TcpOptions> TcpOptionsFrom(const Options& options);

std::unique_ptr<Transport> MakeTcpTransport(TcpOptions options);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_TCP_TRANSPORT_H_

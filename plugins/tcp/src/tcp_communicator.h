// One rank of a tcp group.
//
// Connections: every ordered pair of ranks (a, b) has one TCP connection that a opened and only
// a writes (its messages to b), so each socket is used in one direction by one side: senders
// write from their own thread (no hand-off, scatter/gather of header and payload, the payload
// straight from the caller's memory), and the io thread reads every incoming connection into the
// Mailbox (straight into a waiting RecvInto's buffer when there is one). A large RecvInto from
// one rank reads that rank's connection in the calling thread instead (ReadItself).
//
// Threads: the io thread (runs the io_context: accepting, authenticating, reading), the heartbeat
// thread (writes heartbeats on idle connections, declares silent peers failed), and the callers.
// Send and Recv may be called from any threads at once; sends to one rank are serialised.
//
// AllReduce is native (allreduce.cc; host_allreduce.cc where ranks share a host): once the ranks
// agreed on its arguments
// (reel/collective_agreement.h, on the call's collective frames), a ring whose calling thread
// drives both of its
// connections in one poll loop, writing to the right and reading from the left, with no thread
// hand-off per chunk. For the call it takes the left neighbour's incoming connection over from the
// io thread (Borrow/GiveBack: the connection's FrameReader carries on where the other stopped),
// and every frame that arrives there meanwhile still reaches the Mailbox.
#ifndef REEL_PLUGINS_TCP_SRC_TCP_COMMUNICATOR_H_
#define REEL_PLUGINS_TCP_SRC_TCP_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admission.h"
#include "allreduce_waiting.h"
#include "blocking_io.h"
#include "frame_reader.h"
#include "host_memory.h"
#include "mailbox.h"
#include "reel/collective_agreement.h"
#include "tcp_transport.h"
#include "waiting.h"

namespace reel::tcp {

class TcpCommunicator final : public Communicator {
 public:
  // Forms the group (rendezvous at ctx.coordinator, then the mesh) before `deadline`.
  static Result<std::unique_ptr<Communicator>> Connect(const TcpOptions& options,
                                                       const TransportContext& ctx,
                                                       Deadline deadline);
  // Says goodbye to every peer (so they see a departure, not a failure) and closes everything.
  ~TcpCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override;
  Result<Message> Recv(int source, int tag, Deadline deadline) override;
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override;

  CommunicatorCapabilities capabilities() const override { return {.native_allreduce = true}; }
  // While set, AllReduce sleeps when nothing moves instead of polling (unless allreduce_spin_us
  // asked for polling): the rank's compute needs the cores (reel/transport.h).
  void SetComputeAlongside(bool alongside) override { compute_alongside_.store(alongside); }
  Status AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) override;

  // A RecvInto of at least this many bytes from one rank may read that rank's connection in the
  // calling thread (ReadItself, below).
  static constexpr size_t kReadItselfBytes = size_t{64} << 10;

  // The TCP congestion control of this rank's connection to `peer`, as read back from the socket
  // when the group formed (congestion_control.h); empty for this rank itself.
  const std::string& SendingCongestionControl(int peer) const {
    return peers_[static_cast<size_t>(peer)]->congestion_control;
  }
  // Bytes held of `peer`'s messages for receives that have not asked for them
  // (Mailbox::HeldBytes; TcpOptions::receive_budget_bytes bounds them).
  uint64_t HeldBytes(int peer) const { return mailbox_.HeldBytes(peer); }
  // For tests of a rank that breaks the protocol (a faulty or hostile one with the secret):
  // writes `bytes` as they are on the connection to `dest`, under its write lock, and sends
  // nothing more on it. Records no failure of `dest` if the write is cut short.
  Status WriteRawForTesting(int dest, std::span<const std::byte> bytes, Deadline deadline);

 private:
  struct Peer {
    explicit Peer(asio::io_context& io) : out(io), resume(io), room(io) {}
    int rank = 0;
    Endpoint endpoint;    // where it accepts connections
    std::string machine;  // the host it runs on (HostId()), from the rendezvous
    // Outgoing (this rank writes). `out` is written by whoever holds write_mu.
    DeadlineMutex write_mu;
    tcp::socket out;
    bool out_ready = false;  // guarded by write_mu
    std::string out_broken;  // why writing failed; guarded by write_mu
    std::atomic<int64_t> last_write_ns{0};
    std::string congestion_control;  // of `out`, read back when it connected; fixed after Connect
    // Incoming (the peer writes). The io thread opens and closes `in`; whoever holds read_mu
    // reads it (ReadOnce): the io thread's ReadLoop, or a collective that borrowed it.
    std::unique_ptr<tcp::socket> in;
    DeadlineMutex read_mu;
    std::unique_ptr<FrameReader> frames;  // guarded by read_mu
    bool read_muted = false;  // a polling borrower muted `in` (read_readiness.h); under read_mu
    std::atomic<int64_t> last_heard_ns{0};
    std::atomic<bool> reading{false};
    // The ReadLoop found read_mu taken and waits on `resume` until the borrower gives it back.
    std::atomic<bool> io_waiting{false};
    asio::steady_timer resume;  // io thread only
    // The ReadLoop stopped reading while this peer's queued messages fill the receive budget
    // (TcpOptions::receive_budget_bytes); the Mailbox cancels `room` when a receive makes some.
    asio::steady_timer room;  // io thread only
  };
  class RingAllReduce;
  class HostRounds;

  // AllReduce across hosts (or without shared memory): agrees on the arguments over TCP, then
  // reduces (a small call's data came along), through HostAllReduce or the flat ring (or
  // recursive doubling, RingOrDoubling).
  // REQUIRES: collective_mu_.
  Status AgreeAndReduce(std::span<float> data, ReduceOp op, uint32_t seq, Deadline deadline);
  // The flat ring over `ring` (ranks in ring order, this one among them): RingAllReduce.
  Status Ring(const std::vector<int>& ring, std::span<float> data, ReduceOp op, uint32_t seq,
              Deadline deadline);
  // Recursive doubling over `group` (ranks, this one among them, at least 2;
  // allreduce_doubling.cc).
  Status Doubling(const std::vector<int>& group, std::span<float> data, ReduceOp op, uint32_t seq,
                  Deadline deadline);
  // Once the ranks agreed on the arguments: Doubling for at most allreduce_doubling_bytes, else
  // Ring.
  Status RingOrDoubling(const std::vector<int>& group, std::span<float> data, ReduceOp op,
                        uint32_t seq, Deadline deadline);

  // ---- AllReduce within and across hosts (host_allreduce.cc) ----
  // Once formed: where some host runs more than one rank of the group (and allreduce_layout
  // allows), the ranks of each such host share a segment (host_memory.h); every rank agrees on
  // whether each host's could be set up, else AllReduce stays the flat ring. Logs the layout.
  Status SetUpHostAllReduce(Deadline deadline);
  // Reduces within this host through its segment, runs the ring of the hosts' leaders across
  // hosts, and hands the result back out through the segment. REQUIRES: collective_mu_,
  // host_.shared.
  Status HostAllReduce(std::span<float> data, ReduceOp op, uint32_t seq, Deadline deadline);
  // A group on one host: agrees on the arguments and reduces through the segment alone, no TCP.
  // REQUIRES: collective_mu_, host_.shared, one host.
  Status OneHostAllReduce(std::span<float> data, ReduceOp op, Deadline deadline);
  struct HostLayout {
    std::vector<int> ranks;                // this host's ranks, in rank order (this one among them)
    std::vector<int> leaders;              // every host's lowest rank, in rank order
    std::unique_ptr<HostSegment> segment;  // shared with this host's ranks (when it has others)
    bool shared = false;  // AllReduce goes through HostAllReduce, else through the flat ring
    uint64_t round = 0;   // rounds through the segment so far; guarded by collective_mu_
  };

  // A RecvInto of at least kReadItselfBytes from one rank: when no other thread reads that
  // rank's connection at the moment, the calling thread reads it itself, as AllReduce does (its
  // io thread stands aside, as for Borrow), until its message is in: the payload goes from the
  // socket into `out` with no hand-off between threads, and nothing is read ahead into staging
  // (the kernel keeps what arrives early). Frames for other receives that arrive meanwhile reach
  // the Mailbox as usual. It sleeps in poll() on the socket, waking at least every
  // kCheckFailuresEvery. Empty when a message ahead of its own would be staged past the receive
  // budget (ReadOnce's kFull): the caller gives the connection back and waits as any receive
  // does, nothing posted or read into `out`.
  std::optional<Status> ReadItself(Peer& peer, int tag, std::span<std::byte> out,
                                   Deadline deadline);
  // A caller that reads a connection itself (ReadItself, the ring of AllReduce) and sleeps in
  // poll() wakes at least this often to see failures the io and heartbeat threads recorded.
  static constexpr std::chrono::milliseconds kCheckFailuresEvery{100};
  // True while `peer`'s incoming connection is read: its frames go on and the io thread has not
  // closed it. REQUIRES: peer.read_mu held.
  static bool StillReading(const Peer& peer) {
    return peer.frames && peer.frames->state() == FrameReader::State::kReading &&
           peer.reading.load();
  }
  // One read of `peer`'s incoming connection into its FrameReader. REQUIRES: peer.read_mu held.
  // kFull: nothing was read, the message arriving would be staged and what this rank holds of
  // the peer's messages fills its receive budget (FrameReader::Ready). Every reader, the io
  // thread, ReadItself and the ring alike, stops there: a receive whose message is behind that
  // one waits for a receive of it (TCP's flow control meanwhile holds the sender back).
  enum class ReadResult { kGot, kEmpty, kEnded, kFull };
  ReadResult ReadOnce(Peer& peer);
  // Writes one frame of `type` to rank `dest` (not this rank), waiting for an earlier sender to
  // it until `deadline`; `what` prefixes errors.
  Status SendFrame(int dest, FrameType type, uint32_t tag, std::span<const std::byte> data,
                   Deadline deadline, const std::string& what);
  // Every rank's arguments of collective `seq`, on its frames: OK if they agree, InvalidArgument
  // naming what each rank passed if not, else why the messages failed. With `data` (not empty)
  // this rank's data goes along, and *theirs gets, by rank, the data of every rank that sent it
  // (empty for the others). REQUIRES: collective_mu_.
  Status AgreeOnArguments(const agreement::Args& mine, uint32_t seq, Deadline deadline,
                          std::span<const float> data, std::vector<std::vector<float>>* theirs);
  // Why the collectives are unusable (the first failure), empty while they work.
  std::string CollectivesFailed();
  // The io thread's way to take read_mu: waits on `resume` while a collective holds it.
  asio::awaitable<std::unique_lock<DeadlineMutex>> LockReading(Peer* peer);
  // A collective takes `peer`'s incoming connection for the calling thread (Unavailable if its
  // reading has ended), and gives it back. A `polling` borrower reads without waiting for the
  // socket to be readable, so the socket reports readiness to nobody meanwhile (read_readiness.h:
  // else the io thread wakes for every segment only to park again); before it sleeps in poll()
  // on the socket it calls Unmute. GiveBack unmutes.
  // DeadlineExceeded if another thread (a large receive reading the connection itself) holds it
  // past `deadline`.
  Result<std::unique_lock<DeadlineMutex>> Borrow(Peer& peer, bool polling, Deadline deadline);
  void GiveBack(Peer& peer, std::unique_lock<DeadlineMutex> reading);
  // REQUIRES: peer.read_mu held.
  static void Unmute(Peer& peer);
  // After `peer`'s FrameReader ended (left or failed): records and reports it.
  void ReadingEnded(Peer& peer);

  TcpCommunicator(const TcpOptions& options, int rank, int world, bool isolate_failures);

  // ---- Forming the group (formation.cc) ----
  Status Form(const std::string& coordinator, Deadline deadline);
  Status Listen(const tcp::endpoint& at);
  Status JoinRendezvous(const Endpoint& coordinator, Deadline deadline);
  // After the join: reads the coordinator's progress reports until the table arrives.
  // *answered says whether the coordinator answered at all (else the join may be retried).
  Status AwaitTable(tcp::socket& socket, const Endpoint& coordinator, Deadline deadline,
                    bool* answered);
  Status HostRendezvous(const Endpoint& coordinator, Deadline deadline);
  Status ConnectMesh(Deadline deadline);
  // Gives a new sending connection its congestion control (the option, or the automatic choice)
  // and logs the first choice that changes one, or that the option made.
  Status UseCongestionControl(Peer& peer, const std::string& what);
  Status AwaitIncoming(Deadline deadline);
  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> Admit(std::shared_ptr<tcp::socket> socket,
                              PendingHandshakes::Handle pending);
  // Why an authenticated connection is refused: world size, job, rank, rendezvous state; empty
  // if it is admitted (a sending connection's rank is then reserved in incoming_).
  std::string Screen(const Hello& hello);
  // Counts a connection dropped before it authenticated; the first of an interval arms the
  // timer that logs them all as one line (admission.h). Io thread only.
  void CountDrop(DropReason reason, const std::string& from, const std::string& detail);
  // Logs what CountDrop counted since the last report, if anything.
  void ReportDrops();
  std::string MissingRanks(const std::vector<bool>& present) const;
  // Once formed: how AllReduce waits (allreduce_waiting.h), from the option or from the ranks
  // that share this machine and its cores; logs the choice.
  void ChooseWaiting();

  // ---- Running (tcp_communicator.cc) ----
  asio::awaitable<void> ReadLoop(Peer* peer);
  Status WriteFrame(Peer& peer, std::span<const std::byte> header, std::span<const std::byte> data,
                    Deadline deadline, const std::string& what);
  void HeartbeatLoop();
  void StartHeartbeats();
  // Records that `rank` failed (the first reason wins) and logs it. When this rank saw it
  // itself, it first tells every other rank (a failure notice), so that they blame `rank` even
  // if this process ends right after its own calls fail.
  void PeerFailed(int rank, const std::string& why, bool tell_others);
  void SendNotice(int failed, const std::string& why);
  void Log(const std::string& message) const;
  // A choice made from the host, alike for every rank of this group that this process runs
  // (trainer.local_ranks): logged once per group and process, as "reel tcp: message", not once
  // per rank.
  void LogOncePerProcess(const std::string& message) const;
  std::string Where() const { return "tcp rank " + std::to_string(rank_); }

  const TcpOptions options_;
  const int rank_;
  const int world_;
  Mailbox mailbox_;  // declared before io_: coroutines destroyed with io_ still report into it
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; peers_[rank_] is unused
  std::atomic<bool> closing_{false};
  // One AllReduce at a time. A DeadlineMutex (waiting.h), as read_mu: a call that another
  // thread's AllReduce keeps waiting gives up at its own deadline instead of behind that call.
  DeadlineMutex collective_mu_;
  uint32_t collective_seq_ = 0;  // the next native collective's number; guarded by collective_mu_
  // The first failure of a collective; guarded by failed_mu_ (a call that gave up waiting for
  // collective_mu_ records its failure too, without it).
  std::mutex failed_mu_;
  std::string collectives_failed_;
  std::vector<int> ring_;  // the flat ring: every rank, in rank order
  HostLayout host_;        // fixed once formed, but for its round
  // Its received chunks, kept between calls so that no call allocates; guarded by collective_mu_.
  std::vector<float> allreduce_scratch_;
  // Doubling's message out and in, kept between calls likewise; guarded by collective_mu_.
  std::vector<std::byte> doubling_out_, doubling_in_;
  // How long AllReduce polls once nothing moves, and whether it yields the core between polls;
  // set by ChooseWaiting() before any call.
  AllReduceWaiting allreduce_waiting_;
  std::atomic<bool> compute_alongside_{false};  // SetComputeAlongside
  // How long AllReduce polls now (SpinNow) and whether a polling wait yields its core.
  std::chrono::microseconds AllReduceSpin() const {
    return SpinNow(allreduce_waiting_, options_.allreduce_spin.has_value(),
                   compute_alongside_.load());
  }
  bool AllReduceYield() const { return allreduce_waiting_.yield; }
  bool congestion_logged_ = false;  // the connecting thread's, while the group forms

  // Formation state shared between the io thread (Admit) and the connecting thread.
  std::mutex form_mu_;
  std::condition_variable form_cv_;
  std::vector<std::shared_ptr<tcp::socket>> joiners_;  // rank 0: rendezvous sockets; guarded
  std::vector<bool> joined_;                           // rank 0: ranks in the rendezvous; guarded
  std::vector<bool> incoming_;                         // ranks connected to us; guarded
  bool formed_ = false;                                // guarded by form_mu_
  bool rendezvous_open_ = true;                        // rank 0; guarded by form_mu_
  Nonce job_{};  // the job nonce (wire.h): rank 0 draws it, the others learn it; guarded
  std::string disagreement_;  // rank 0: why a joining rank's options differ; guarded
  // Connections in Admit that have not authenticated yet, and those dropped; io thread only
  // (drops_ also in the destructor, once the io thread has ended).
  PendingHandshakes pending_;
  DropReport drops_;
  asio::steady_timer drop_timer_;       // io thread only
  std::set<tcp::socket*> handshaking_;  // every connection in Admit; io thread only
  // Ranks whose incoming connection is being read: Connect() returns when every peer is here,
  // not when it is only in incoming_ (set before the verdict is written, so that a second
  // connection claiming the same rank is refused), or the first native collective would find
  // the connection not yet read. Guarded by form_mu_.
  std::vector<bool> admitted_;

  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool stop_heartbeats_ = false;  // guarded by heartbeat_mu_
  std::thread heartbeat_thread_;
  std::thread io_thread_;
};

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_TCP_COMMUNICATOR_H_

// The conformance suite's harness (see reel/testing/transport_conformance.h): groups of threads,
// this process's rank of a launched world, and the names of the parameterised cases.
#include "reel/testing/transport_conformance.h"

#include <map>
#include <mutex>
#include <thread>

#include "harness.h"
#include "reel/core/collectives.h"
#include "reel/core/connect.h"
#include "reel/core/rank_environment.h"

namespace reel::conformance {
namespace {

using namespace std::chrono_literals;

// A communicator that forwards to one it does not own, so that the process's backend can be
// used both directly and under the collectives wrapper (which owns what it wraps).
class Borrowed final : public Communicator {
 public:
  explicit Borrowed(Communicator& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline d) override {
    return c_.Send(dest, tag, data, d);
  }
  Result<Message> Recv(int source, int tag, Deadline d) override { return c_.Recv(source, tag, d); }
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline d) override {
    return c_.RecvInto(source, tag, out, d);
  }
  CommunicatorCapabilities capabilities() const override { return c_.capabilities(); }
  Status AllReduce(std::span<float> data, ReduceOp op, Deadline d) override {
    return c_.AllReduce(data, op, d);
  }
  Status Broadcast(std::span<std::byte> data, int root, Deadline d) override {
    return c_.Broadcast(data, root, d);
  }
  Status AllGather(std::span<const std::byte> in, std::span<std::byte> out, Deadline d) override {
    return c_.AllGather(in, out, d);
  }
  Status Barrier(Deadline d) override { return c_.Barrier(d); }
  Status ReduceScatter(std::span<float> data, ReduceOp op, Deadline d) override {
    return c_.ReduceScatter(data, op, d);
  }
  Status AllGatherShards(std::span<float> data, Deadline d) override {
    return c_.AllGatherShards(data, d);
  }

 private:
  Communicator& c_;
};

// This process's rank of the launched world, connected at first use and kept for every test.
struct World {
  Status status;  // why connecting failed, if it did
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Communicator> backend;
  std::unique_ptr<Communicator> with_collectives;  // over `backend`, borrowed
};

std::mutex worlds_mu;
std::map<std::string, World>& Worlds() {  // by transport name; guarded by worlds_mu
  static auto* worlds = new std::map<std::string, World>;
  return *worlds;
}

Status ConnectWorld(const TransportUnderTest& t, World& w) {
  REEL_ASSIGN_OR_RETURN(Group group, t.group());
  REEL_ASSIGN_OR_RETURN(TransportContext ctx, core::TransportContextFromEnvironment());
  if (!group.coordinator.empty()) ctx.coordinator = group.coordinator;
  w.transport = std::move(group.transport);
  REEL_ASSIGN_OR_RETURN(w.backend, w.transport->Connect(ctx, DeadlineIn(5min)));
  w.with_collectives = core::WithRingCollectives(std::make_unique<Borrowed>(*w.backend));
  return Status::Ok();
}

World& ThisProcess(const TransportUnderTest& t) {
  std::lock_guard<std::mutex> lock(worlds_mu);
  auto [it, fresh] = Worlds().try_emplace(t.name);
  if (fresh)
    it->second.status = ConnectWorld(t, it->second)
                            .WithContext("connecting this process's rank over '" + t.name + "'");
  return it->second;
}

// After the last test every rank waits for the others before leaving, so a fast rank's exit is
// not taken for a peer that died by one still finishing its last test.
class LeaveTogether : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(worlds_mu);
    for (auto& [name, w] : Worlds()) {
      if (!w.status.ok()) continue;
      Status s = w.with_collectives->Barrier(Far());
      EXPECT_TRUE(s.ok()) << name << ": final barrier: " << s;
      w.with_collectives.reset();
      w.backend.reset();
      w.transport.reset();
    }
  }
};

Result<Communicators> ConnectBackends(Transport& transport, int n, const std::string& coordinator,
                                      Deadline deadline) {
  std::vector<TransportContext> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back({r, n, coordinator});
  return core::ConnectConcurrently(transport, ranks, deadline);
}

Communicators Wrapped(Communicators raw) {
  for (auto& c : raw) c = core::WithRingCollectives(std::move(c));
  return raw;
}

}  // namespace

std::vector<Status> RunOnRanks(const Communicators& comms,
                               const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i)
    threads.emplace_back([&, i] { statuses[i] = fn(*comms[i]); });
  for (auto& t : threads) t.join();
  return statuses;
}

Result<Communicators> ConnectOnThreads(Transport& transport, int n, const std::string& coordinator,
                                       Deadline deadline) {
  REEL_ASSIGN_OR_RETURN(Communicators raw, ConnectBackends(transport, n, coordinator, deadline));
  return Wrapped(std::move(raw));
}

void RunAndReport(const TransportUnderTest& t, int threads, int min_ranks,
                  const std::function<Status(Communicator&)>& fn, Layer layer) {
  if (t.placement == Placement::kProcesses) {
    World& w = ThisProcess(t);
    ASSERT_TRUE(w.status.ok()) << w.status;
    if (w.backend->size() < min_ranks)
      GTEST_SKIP() << "needs at least " << min_ranks << " ranks; the world has "
                   << w.backend->size();
    Communicator& c = layer == Layer::kBackend ? *w.backend : *w.with_collectives;
    Status s = fn(c);
    EXPECT_TRUE(s.ok()) << t.name << " rank " << c.rank() << " of " << c.size() << ": " << s;
    return;
  }
  Result<Group> group = t.group();
  ASSERT_TRUE(group.ok()) << t.name << ": " << group.status();
  Result<Communicators> raw =
      ConnectBackends(*group->transport, threads, group->coordinator, Far());
  ASSERT_TRUE(raw.ok()) << t.name << ": " << raw.status();
  Communicators comms = layer == Layer::kBackend ? std::move(*raw) : Wrapped(std::move(*raw));
  std::vector<Status> statuses = RunOnRanks(comms, fn);
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << t.name << " rank " << r << " of " << threads << ": "
                                  << statuses[r];
}

void TransportConformance::OnRanks(int threads, int min_ranks,
                                   const std::function<Status(Communicator&)>& fn, Layer layer) {
  RunAndReport(GetParam(), threads, min_ranks, fn, layer);
}

Communicators TransportConformance::ThreadsOnly(int n, const char* why) {
  const TransportUnderTest& t = GetParam();
  if (t.placement == Placement::kProcesses) {
    [&] { GTEST_SKIP() << "only with ranks as threads of one process: " << why; }();
    return {};
  }
  Result<Group> group = t.group();
  if (!group.ok()) {
    ADD_FAILURE() << t.name << ": " << group.status();
    return {};
  }
  // The transport object is not needed once the group is formed.
  Result<Communicators> comms = ConnectOnThreads(*group->transport, n, group->coordinator, Far());
  if (!comms.ok()) {
    ADD_FAILURE() << t.name << ": " << comms.status();
    return {};
  }
  return std::move(*comms);
}

size_t Elements(Count count, int n) {
  const size_t ranks = static_cast<size_t>(n);
  switch (count) {
    case Count::kEmpty:
      return 0;
    case Count::kOne:
      return 1;
    case Count::kFewerThanRanks:
      return ranks - 1;
    case Count::kNotDivisible:
      return 100 * ranks + 1;
    case Count::kLarge:
      return (size_t{1} << 18) * ranks + 1;  // about a million floats per rank, still not divisible
  }
  return 0;
}

std::vector<Count> AllCounts() {
  return {Count::kEmpty, Count::kOne, Count::kFewerThanRanks, Count::kNotDivisible, Count::kLarge};
}

std::vector<int> RankCounts(const TransportUnderTest& transport) {
  if (transport.placement == Placement::kProcesses) return {0};
  return {1, 2, 3, 4};
}

std::string TransportCaseName(const ::testing::TestParamInfo<TransportUnderTest>& info) {
  return info.param.name;
}

std::string CollectiveCaseName(const ::testing::TestParamInfo<CollectiveCase>& info) {
  const auto& [transport, ranks, count] = info.param;
  static const char* const kNames[] = {"empty", "one", "fewer_than_ranks", "not_divisible",
                                       "large"};
  return transport.name + "_" +
         (ranks == 0 ? std::string("world") : std::to_string(ranks) + "ranks") + "_" +
         kNames[static_cast<int>(count)];
}

int LinkSuite(const TransportUnderTest& transport) {
  static const bool registered = [] {
    ::testing::AddGlobalTestEnvironment(new LeaveTogether);
    return true;
  }();
  (void)registered;
  (void)transport;
  return PointToPointTestsLinked() + CollectiveTestsLinked() + CollectiveArgumentTestsLinked() +
         SplitTestsLinked();
}

}  // namespace reel::conformance

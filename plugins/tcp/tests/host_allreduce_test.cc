// AllReduce through the shared memory of a host's ranks and a ring of the hosts' leaders
// (host_allreduce.cc), and the segment's hand-over (host_memory.h). Ranks are threads of this
// process; option host_id places them on hosts, so one process has the layouts of several.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include "host_memory.h"
#include "reel/testing/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing::host_allreduce_test {
namespace {

using ::reel::conformance::CollectiveConformance;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A tcp transport whose rank r runs on host `host(r)` (option host_id).
class HostsTransport final : public Transport {
 public:
  HostsTransport(TcpOptions options, std::function<std::string(int)> host)
      : options_(std::move(options)), host_(std::move(host)) {}
  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                Deadline deadline) override {
    TcpOptions o = options_;
    o.host_id = host_(ctx.rank);
    return MakeTcpTransport(o)->Connect(ctx, deadline);
  }

 private:
  const TcpOptions options_;
  const std::function<std::string(int)> host_;
};

// Every AllReduce through the segments, however small (allreduce_small_bytes 0).
TcpOptions ThroughMemory() {
  TcpOptions o = TestOptions();
  o.allreduce_small_bytes = 0;
  return o;
}

conformance::TransportUnderTest Layout(const std::string& name,
                                       std::function<std::string(int)> host) {
  return conformance::RanksAsThreads(name, [host]() -> Result<conformance::Group> {
    return conformance::Group{std::make_unique<HostsTransport>(ThroughMemory(), host),
                              FreeCoordinator()};
  });
}

// The collectives of the conformance suite on 1-4 ranks: hosts of two ranks each (1, 2, 2+1,
// 2+2), the first rank alone and the rest on another host (1, 1+1, 1+2, 1+3), and a host each.
INSTANTIATE_TEST_SUITE_P(
    TcpHosts, CollectiveConformance,
    ::testing::Combine(
        ::testing::Values(
            Layout("tcp_hosts_of_two", [](int r) { return "host" + std::to_string(r / 2); }),
            Layout("tcp_first_alone", [](int r) { return r == 0 ? "a" : "b"; }),
            Layout("tcp_host_each", [](int r) { return "host" + std::to_string(r); })),
        ::testing::Values(1, 2, 3, 4), ::testing::ValuesIn(conformance::AllCounts())),
    conformance::CollectiveCaseName);

// Ranks as threads on the hosts `hosts` names (rank r on host hosts[r]).
conformance::Communicators OnHosts(const std::string& hosts, TcpOptions options) {
  HostsTransport transport(
      std::move(options), [hosts](int r) { return std::string(1, hosts[static_cast<size_t>(r)]); });
  auto comms = conformance::ConnectOnThreads(transport, static_cast<int>(hosts.size()),
                                             FreeCoordinator(), DeadlineIn(60s));
  EXPECT_TRUE(comms.ok()) << comms.status();
  return comms.ok() ? std::move(*comms) : conformance::Communicators{};
}

// Every rank's AllReduce of its row of `data`, at once; the first failure, else OK.
Status AllReduceOnThreads(conformance::Communicators& comms, std::vector<std::vector<float>>& data,
                          ReduceOp op) {
  std::vector<Status> status(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] { status[r] = comms[r]->AllReduce(data[r], op, DeadlineIn(60s)); });
  for (auto& t : threads) t.join();
  for (const Status& s : status) REEL_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Results equal the flat ring's, bit for bit, for every operation, size (empty, one round of the
// segment and several, handing out in several rounds) and layout, including uneven ones. Values
// are whole numbers, so every order of summing gives the same floats.
TEST(HostAllReduce, ResultsEqualTheFlatRingsForEveryOpSizeAndLayout) {
  const size_t kSlot = size_t{128} << 10;  // host_allreduce.cc's kSlotFloats
  for (const std::string hosts : {"aaa", "abc", "aab", "abb", "aabb", "abbb"}) {
    TcpOptions flat = ThroughMemory();
    flat.allreduce_layout = TcpOptions::Layout::kFlat;
    TcpOptions hierarchical = ThroughMemory();
    hierarchical.allreduce_layout = TcpOptions::Layout::kHierarchical;
    auto flat_comms = OnHosts(hosts, flat);
    auto comms = OnHosts(hosts, hierarchical);
    ASSERT_EQ(comms.size(), hosts.size());
    ASSERT_EQ(flat_comms.size(), hosts.size());
    std::mt19937 random(7);
    std::uniform_int_distribution<int> value(-1000, 1000);
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      for (const size_t floats : {size_t{0}, size_t{1}, size_t{5}, 2 * kSlot + 3, 9 * kSlot + 1}) {
        std::vector<std::vector<float>> data(hosts.size(), std::vector<float>(floats));
        for (auto& row : data)
          for (float& x : row) x = static_cast<float>(value(random));
        std::vector<std::vector<float>> expected = data;
        ASSERT_TRUE(AllReduceOnThreads(flat_comms, expected, op).ok());
        ASSERT_TRUE(AllReduceOnThreads(comms, data, op).ok());
        for (size_t r = 0; r < hosts.size(); ++r)
          ASSERT_EQ(data[r], expected[r]) << "hosts " << hosts << ", rank " << r << ", " << floats
                                          << " floats, op " << static_cast<int>(op);
      }
    }
  }
}

// How many mappings of a host's segment this process has (/proc/self/maps names a memfd).
int SegmentsMapped() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find("memfd:reel-host-allreduce") != std::string::npos;
  return n;
}

// The layout follows the hosts and the option: a segment per rank where a host has two ranks
// (automatic), none for a host each or with allreduce_layout=flat; and none once they are gone.
TEST(HostAllReduce, SharesMemoryOnlyWhereAHostHasSeveralRanks) {
  ASSERT_EQ(SegmentsMapped(), 0);
  {
    auto comms = OnHosts("aab", TestOptions());
    ASSERT_EQ(comms.size(), 3u);
    EXPECT_EQ(SegmentsMapped(), 2) << "ranks 0 and 1 share host a";
  }
  EXPECT_EQ(SegmentsMapped(), 0) << "the communicators are gone, their mappings must be too";
  {
    auto comms = OnHosts("abc", TestOptions());
    ASSERT_EQ(comms.size(), 3u);
    EXPECT_EQ(SegmentsMapped(), 0);
  }
  {
    TcpOptions flat = TestOptions();
    flat.allreduce_layout = TcpOptions::Layout::kFlat;
    auto comms = OnHosts("aa", flat);
    ASSERT_EQ(comms.size(), 2u);
    EXPECT_EQ(SegmentsMapped(), 0);
  }
}

// Two jobs with different secrets on one host, at once: each has its own segment, and neither
// sees the other's data.
TEST(HostAllReduce, JobsWithDifferentSecretsOnOneHostKeepTheirOwnMemory) {
  TcpOptions a = ThroughMemory(), b = ThroughMemory();
  a.secret = "job a";
  b.secret = "job b";
  conformance::Communicators job_a, job_b;
  std::thread form_b([&] { job_b = OnHosts("hh", b); });
  job_a = OnHosts("hh", a);
  form_b.join();
  ASSERT_EQ(job_a.size(), 2u);
  ASSERT_EQ(job_b.size(), 2u);
  auto run = [](conformance::Communicators& comms, float value) {
    for (int call = 0; call < 50; ++call) {
      std::vector<std::vector<float>> data(2, std::vector<float>(1000, value));
      ASSERT_TRUE(AllReduceOnThreads(comms, data, ReduceOp::kSum).ok());
      for (const auto& row : data) ASSERT_EQ(row, std::vector<float>(1000, 2 * value));
    }
  };
  std::thread run_b([&] { run(job_b, 2.0f); });
  run(job_a, 1.0f);
  run_b.join();
}

TEST(HostAllReduce, ABadLayoutOptionIsRefused) {
  Result<Options> tree = ParseOptions(TcpOptionSchema(), {{"allreduce_layout", "tree"}});
  ASSERT_TRUE(tree.ok()) << tree.status();
  Result<TcpOptions> t = TcpOptionsFrom(*tree);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("auto, flat, hierarchical"));
  Result<Options> spaces = ParseOptions(TcpOptionSchema(), {{"host_id", "my host"}});
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(TcpOptionsFrom(*spaces).status().code(), StatusCode::kInvalidArgument);
  Result<Options> unset = ParseOptions(TcpOptionSchema(), {});
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(TcpOptionsFrom(*unset)->allreduce_layout, TcpOptions::Layout::kAuto);
}

// A segment that could still be resized (and so fault a mapping) is not mapped.
TEST(HostMemory, AnUnsealedSegmentIsRefused) {
  UniqueFd fd(memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  ASSERT_EQ(ftruncate(fd.get(), 4096), 0);
  Result<std::unique_ptr<HostSegment>> s = HostSegment::Map(std::move(fd));
  EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << s.status();
}

// The leader hands the segment to the process it was told of, and to no other: this process,
// which knows the socket's name (as anyone can, from /proc/net/unix), gets nothing.
TEST(HostMemory, OnlyTheNamedProcessGetsTheSegment) {
  auto segment = HostSegment::Create(4096);
  ASSERT_TRUE(segment.ok()) << segment.status();
  std::memcpy((*segment)->data(), "shared", 7);
  auto offer = SegmentOffer::Open();
  ASSERT_TRUE(offer.ok()) << offer.status();
  const std::string name = (*offer)->name();
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the named rank: fetches once told to, and checks what it maps
    close(go[1]);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    auto fd = FetchSegment(name, DeadlineIn(30s));
    if (!fd.ok()) _exit(3);
    auto mapped = HostSegment::Map(std::move(*fd));
    _exit(mapped.ok() && std::memcmp((*mapped)->data(), "shared", 7) == 0 ? 0 : 4);
  }
  close(go[0]);
  std::atomic<bool> stop{false};
  int strangers = 0;
  Status handed;
  std::thread leader([&] {
    handed = (*offer)->HandOut((*segment)->fd(), {child}, stop, DeadlineIn(30s), &strangers);
  });
  Result<UniqueFd> stolen = FetchSegment(name, DeadlineIn(30s));
  EXPECT_FALSE(stolen.ok()) << "a process the leader was not told of got the segment";
  EXPECT_THAT(stolen.status().message(), HasSubstr("without the shared segment"));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  leader.join();
  EXPECT_TRUE(handed.ok()) << handed;
  EXPECT_EQ(strangers, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  close(go[1]);
}

// A member whose host leader listens but never accepts (stopped, say) with its backlog full: the
// connect ends at the deadline instead of blocking for as long as the leader is stopped.
TEST(HostMemory, FetchingFromALeaderThatNeverAcceptsEndsAtTheDeadline) {
  const std::string name = "reel-test-full-backlog-" + std::to_string(getpid());
  UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  ASSERT_GE(listener.get(), 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(listener.get(), 0), 0);
  // Fill the backlog: non-blocking connects until the kernel says it is full.
  std::vector<UniqueFd> queued;
  while (true) {
    UniqueFd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    ASSERT_GE(c.get(), 0);
    if (connect(c.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
      ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
      break;
    }
    queued.push_back(std::move(c));
    ASSERT_LT(queued.size(), 1000u) << "the backlog never filled";
  }
  Result<UniqueFd> fd = FetchSegment(name, DeadlineIn(300ms));
  EXPECT_EQ(fd.status().code(), StatusCode::kDeadlineExceeded) << fd.status();
  EXPECT_THAT(fd.status().message(), HasSubstr("connecting to the host's leader at @" + name +
                                               ": its backlog stayed full"));
  // Room in the backlog, but the leader never hands anything over: ends at the deadline too.
  std::vector<UniqueFd> accepted;
  for (int fd; (fd = accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC)) >= 0;)
    accepted.emplace_back(fd);
  ASSERT_EQ(accepted.size(), queued.size());
  Result<UniqueFd> silent = FetchSegment(name, DeadlineIn(300ms));
  EXPECT_EQ(silent.status().code(), StatusCode::kDeadlineExceeded) << silent.status();
  EXPECT_THAT(silent.status().message(), HasSubstr("did not hand over the shared segment"));
}

}  // namespace
}  // namespace reel::tcp::testing::host_allreduce_test

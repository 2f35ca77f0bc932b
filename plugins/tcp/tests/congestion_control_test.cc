// The congestion control of sending connections (congestion_control.h): automatic (reno instead
// of bbr on loopback only), the system's, or the one named; read back from the sockets of a
// formed group; names that are no algorithm are refused before anything connects.
#include "congestion_control.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tcp_communicator.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string SystemCongestionControl() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  in >> name;
  return name;
}

TEST(CongestionControl, AutomaticReplacesBbrOnLoopbackOnly) {
  const CongestionChoice loop_bbr = ChooseCongestionControl("", true, "bbr");
  EXPECT_EQ(loop_bbr.algorithm, "reno");
  EXPECT_THAT(loop_bbr.why, AllOf(HasSubstr("on loopback use TCP congestion control reno"),
                                  HasSubstr("congestion_control=system keeps bbr")));
  // Between hosts, and for algorithms that do not pace, the system's choice stands.
  EXPECT_EQ(ChooseCongestionControl("", false, "bbr").algorithm, "");
  EXPECT_EQ(ChooseCongestionControl("", true, "cubic").algorithm, "");
  EXPECT_THAT(ChooseCongestionControl("", false, "bbr").why, HasSubstr("not loopback"));
}

TEST(CongestionControl, TheOptionOverridesTheChoiceEitherWay) {
  EXPECT_EQ(ChooseCongestionControl("system", true, "bbr").algorithm, "");
  EXPECT_THAT(
      ChooseCongestionControl("system", true, "bbr").why,
      HasSubstr("keep the system's TCP congestion control (bbr) (congestion_control=system)"));
  EXPECT_EQ(ChooseCongestionControl("cubic", false, "bbr").algorithm, "cubic");
  EXPECT_EQ(ChooseCongestionControl("bbr", true, "reno").algorithm, "bbr");
}

TEST(CongestionControl, NamesThatAreNoAlgorithmAreRefusedAndNamed) {
  for (const char* bad : {"no_such_algo", "BBR", "reno; rm", "a_name_far_too_long_for_tcp"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"congestion_control", bad}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(o.status().message(),
                HasSubstr("tcp option 'congestion_control': '" + std::string(bad) + "'"));
  }
  for (const char* good : {"", "system", "reno"}) {
    Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"congestion_control", good}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    Result<TcpOptions> o = TcpOptionsFrom(*parsed);
    ASSERT_TRUE(o.ok()) << good << ": " << o.status();
    EXPECT_EQ(o->congestion_control, good);
  }
}

TEST(CongestionControl, ASocketsAlgorithmIsSetAndReadBack) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.open(tcp::v4());
  ASSERT_TRUE(SetCongestionControl(socket, "reno").ok());
  Result<std::string> now = CongestionControlOf(socket);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(*now, "reno");
  Status refused = SetCongestionControl(socket, "no_such_algo");
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("refused TCP congestion control 'no_such_algo'"));
}

// Forms a group of 2 on loopback with `option` and returns what each rank's sending connection
// to the other uses, after checking that an AllReduce still works.
std::vector<std::string> FormedWith(const std::string& option) {
  TcpOptions o = TestOptions();
  o.congestion_control = option;
  auto transport = MakeTcpTransport(o);
  const std::string coordinator = FreeCoordinator();
  std::vector<Result<std::unique_ptr<Communicator>>> comms;
  for (int r = 0; r < 2; ++r) comms.emplace_back(InternalError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      comms[r] = transport->Connect({r, 2, coordinator}, DeadlineIn(30s));
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> used;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(comms[r].ok()) << comms[r].status();
    if (!comms[r].ok()) return {};
    used.push_back(static_cast<TcpCommunicator&>(**comms[r]).SendingCongestionControl(1 - r));
  }
  threads.clear();
  std::vector<Status> sums(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(300000, static_cast<float>(r + 1));
      sums[r] = (*comms[r])->AllReduce(v, ReduceOp::kSum, DeadlineIn(30s));
      if (sums[r].ok() && v.back() != 3.0f) sums[r] = InternalError("wrong sum");
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(sums[r].ok()) << "rank " << r << ": " << sums[r];
  return used;
}

TEST(CongestionControl, AFormedGroupsSendingConnectionsUseTheChoice) {
  const std::string system = SystemCongestionControl();
  ASSERT_FALSE(system.empty()) << "cannot read net.ipv4.tcp_congestion_control";
  const std::string automatic = system == "bbr" ? "reno" : system;
  EXPECT_EQ(FormedWith(""), (std::vector<std::string>{automatic, automatic}));
  EXPECT_EQ(FormedWith("system"), (std::vector<std::string>{system, system}));
  EXPECT_EQ(FormedWith("reno"), (std::vector<std::string>{"reno", "reno"}));
}

}  // namespace
}  // namespace reel::tcp::testing

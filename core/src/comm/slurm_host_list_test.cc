// Slurm's compressed host lists and task counts expand as `scontrol show hostnames` expands them;
// malformed ones are refused quoting the list.
#include "reel/core/slurm_host_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reel::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Hosts(std::string_view list) {
  auto hosts = ExpandSlurmHostList(list);
  EXPECT_TRUE(hosts.ok()) << hosts.status();
  return hosts.ok() ? *hosts : std::vector<std::string>{};
}

TEST(SlurmHostList, PlainNamesStayAsTheyAre) {
  EXPECT_THAT(Hosts("node01"), ElementsAre("node01"));
  EXPECT_THAT(Hosts("a,b.example.org,c-1"), ElementsAre("a", "b.example.org", "c-1"));
}

TEST(SlurmHostList, RangesAndListsInBracketsKeepTheirPadding) {
  EXPECT_THAT(Hosts("node[01-04,07],gpu[1-2]"),
              ElementsAre("node01", "node02", "node03", "node04", "node07", "gpu1", "gpu2"));
  EXPECT_THAT(Hosts("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(Hosts("n[098-100]"), ElementsAre("n098", "n099", "n100"));
  EXPECT_THAT(Hosts("n[9-11]"), ElementsAre("n9", "n10", "n11"));
  EXPECT_THAT(Hosts("n[0-1]"), ElementsAre("n0", "n1"));
  EXPECT_THAT(Hosts("n[5]"), ElementsAre("n5"));
}

TEST(SlurmHostList, SeveralBracketsMultiplyAndSuffixesFollow) {
  EXPECT_THAT(Hosts("rack[1-2]-n[1-2]"),
              ElementsAre("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"));
  EXPECT_THAT(Hosts("n[1-2].ib,login"), ElementsAre("n1.ib", "n2.ib", "login"));
}

void ExpectBad(std::string_view list, const std::string& why) {
  auto hosts = ExpandSlurmHostList(list);
  ASSERT_FALSE(hosts.ok()) << list;
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(hosts.status().message(), HasSubstr("'" + std::string(list) + "'"));
  EXPECT_THAT(hosts.status().message(), HasSubstr(why));
}

TEST(SlurmHostList, MalformedListsAreRefusedQuotingThem) {
  ExpectBad("", "empty");
  ExpectBad("a,,b", "empty host name");
  ExpectBad("a,", "empty host name");
  ExpectBad("node[1-3", "'[' without its ']'");
  ExpectBad("node1-3]", "']' without its '['");
  ExpectBad("node[[1-3]]", "brackets inside brackets");
  ExpectBad("node[3-1]", "runs backwards");
  ExpectBad("node[a-b]", "not a number");
  ExpectBad("node[]", "not a number");
  ExpectBad("node[1,]", "not a number");
  ExpectBad("node[1--3]", "not a number");
  ExpectBad("node[0-99999999]", "more than");
  ExpectBad("a[0-1023]b[0-1023]c[0-3]", "more than");
}

TEST(SlurmTaskCounts, RepeatsExpandPerNode) {
  auto counts = ExpandSlurmTaskCounts("2(x3),1");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, ElementsAre(2, 2, 2, 1));
  counts = ExpandSlurmTaskCounts("4");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, ElementsAre(4));
}

TEST(SlurmTaskCounts, MalformedCountsAreRefused) {
  for (std::string_view bad : {"", "0", "2(x0)", "2(x3", "x3", "2,,1", "-1", "2(y3)", "two"}) {
    auto counts = ExpandSlurmTaskCounts(bad);
    ASSERT_FALSE(counts.ok()) << bad;
    EXPECT_THAT(counts.status().message(), HasSubstr("is not N or N(xM)")) << bad;
  }
}

}  // namespace
}  // namespace reel::core

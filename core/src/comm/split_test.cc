// The core's generic Split over point-to-point (beyond the conformance suite): its sub-groups
// share the parent's reserved tags, so one is alive at a time and it is not split again, and
// its users get the sub-group's smaller tag range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;

TEST(GenericSplit, OneSubGroupAtATimeNotSplitAgainUserTagsBounded) {
  auto raw = CreateInprocGroup(2);
  ASSERT_TRUE(raw.ok());
  conformance::Communicators comms;
  for (auto& c : *raw) comms.push_back(WithRingCollectives(std::move(c)));
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    const Deadline far = DeadlineIn(std::chrono::seconds(60));
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub, c.Split(0, c.rank(), far));
    Result<std::unique_ptr<Communicator>> second = c.Split(0, c.rank(), far);
    if (second.status().code() != StatusCode::kFailedPrecondition ||
        second.status().message().find("earlier sub-group") == std::string::npos)
      return InternalError("a second Split while the first lives gave " +
                           second.status().ToString());
    Result<std::unique_ptr<Communicator>> nested = sub->Split(0, 0, far);
    if (nested.status().code() != StatusCode::kUnimplemented)
      return InternalError("splitting a sub-group gave " + nested.status().ToString());
    Status big_tag = sub->Send(1 - c.rank(), kSubgroupUserTags, {}, far);
    if (big_tag.code() != StatusCode::kInvalidArgument ||
        big_tag.message().find("[0, " + std::to_string(kSubgroupUserTags) + ")") ==
            std::string::npos)
      return InternalError("a sub-group Send on tag kSubgroupUserTags gave " + big_tag.ToString());
    sub.reset();
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> again, c.Split(7, 0, far));
    float v[1] = {1.0f};
    REEL_RETURN_IF_ERROR(again->AllReduce(v, ReduceOp::kSum, far));
    if (v[0] != 2.0f)
      return InternalError("AllReduce in a later sub-group gave " + std::to_string(v[0]));
    return Status::Ok();
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

}  // namespace
}  // namespace reel::core

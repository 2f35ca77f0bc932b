// The collectives wrapper beyond the conformance suite: native collectives are forwarded, ring
// fallbacks are used otherwise, and wrapping leaves point-to-point untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"
#include "train/tiny_run.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A backend that claims a native AllReduce (and nothing else) and records its calls.
class NativeAllReduceBackend final : public Communicator {
 public:
  NativeAllReduceBackend(std::unique_ptr<Communicator> inner, int* calls)
      : inner_(std::move(inner)), calls_(calls) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(int d, int t, std::span<const std::byte> b, Deadline dl) override {
    return inner_->Send(d, t, b, dl);
  }
  Result<Message> Recv(int s, int t, Deadline dl) override { return inner_->Recv(s, t, dl); }
  CommunicatorCapabilities capabilities() const override { return {.native_allreduce = true}; }
  Status AllReduce(std::span<float> data, ReduceOp, Deadline) override {
    ++*calls_;
    for (float& v : data) v = -7.0f;  // a mark no ring could produce from the inputs below
    return Status::Ok();
  }

 private:
  std::unique_ptr<Communicator> inner_;
  int* calls_;
};

TEST(RingCollectives, NativeCollectivesAreForwardedOthersRunOnTheRing) {
  auto raw = CreateInprocGroup(1);
  ASSERT_TRUE(raw.ok());
  int calls = 0;
  auto comm =
      WithRingCollectives(std::make_unique<NativeAllReduceBackend>(std::move((*raw)[0]), &calls));
  EXPECT_TRUE(comm->capabilities().native_allreduce);
  EXPECT_FALSE(comm->capabilities().native_allgather);
  std::vector<float> data = {1.0f, 2.0f};
  ASSERT_TRUE(comm->AllReduce(data, ReduceOp::kSum, NoDeadline()).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(data, (std::vector<float>{-7.0f, -7.0f}));
  // AllGather is not native: the wrapper's ring (one rank: a copy) answers.
  std::vector<std::byte> in = {std::byte{1}, std::byte{2}}, out(2);
  ASSERT_TRUE(comm->AllGather(in, out, NoDeadline()).ok());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(comm->Barrier(NoDeadline()).ok());
}

TEST(RingCollectives, UnwrappedBackendHasNoCollectives) {
  auto raw = CreateInprocGroup(2);
  ASSERT_TRUE(raw.ok());
  std::vector<float> data(4);
  EXPECT_EQ((*raw)[0]->AllReduce(data, ReduceOp::kSum, NoDeadline()).code(),
            StatusCode::kUnimplemented);
}

TEST(RingCollectives, AllGatherMayUseItsOwnOutputBlockAsInput) {
  auto raw = CreateInprocGroup(1);
  ASSERT_TRUE(raw.ok());
  auto comm = WithRingCollectives(std::move((*raw)[0]));
  std::vector<std::byte> buf = {std::byte{9}, std::byte{8}};
  ASSERT_TRUE(comm->AllGather(std::span<const std::byte>(buf), buf, NoDeadline()).ok());
  EXPECT_EQ(buf, (std::vector<std::byte>{std::byte{9}, std::byte{8}}));
}

TEST(RingCollectives, TagErrorNamesTheReservedRange) {
  auto raw = CreateInprocGroup(2);
  ASSERT_TRUE(raw.ok());
  auto comm = WithRingCollectives(std::move((*raw)[0]));
  Status s = comm->Send(1, kCollectiveTagBase, {}, NoDeadline());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("reserved for collectives"));
}

// Large allreduces travel in chunks of 256 KiB (65536 floats). Here rank 0's segments are 8 such
// chunks and rank 1's 9: every message would have the same size, so only the agreement before the
// chunks tells the ranks apart. Both must refuse, naming the sizes, not return a corrupt sum.
TEST(RingCollectives, PipelinedAllReduceRefusesRanksThatDisagreeOnTheSize) {
  auto comms = testing::InprocRingGroup(2);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    std::vector<float> data(size_t{65536} * 2 * (c.rank() == 0 ? 8 : 9), 1.0f);
    return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(st[r].code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("same size")) << "rank " << r;
  }
  for (int r : {0, 1})
    EXPECT_THAT(st[r].message(), HasSubstr("AllReduce (sum) of 1048576 floats on rank 0; "
                                           "AllReduce (sum) of 1179648 floats on rank 1"));
}

// A rank that never joins an allreduce: the others stop at the deadline in the agreement.
TEST(RingCollectives, PipelinedAllReduceEndsAtItsDeadlineWhenARankStaysAway) {
  auto comms = testing::InprocRingGroup(3);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    if (c.rank() == 2) return Status::Ok();
    std::vector<float> data(size_t{3} << 20, 1.0f);
    return c.AllReduce(data, ReduceOp::kSum, DeadlineIn(300ms));
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(st[r].code(), StatusCode::kDeadlineExceeded) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("AllReduce of 3145728 floats")) << "rank " << r;
  }
}

// Drops every message of more than `keep_up_to` bytes it is asked to send: a rank that agrees on
// a collective and then stops sending its data.
class DroppingBackend final : public Communicator {
 public:
  DroppingBackend(std::unique_ptr<Communicator> inner, size_t keep_up_to)
      : inner_(std::move(inner)), keep_up_to_(keep_up_to) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(int d, int t, std::span<const std::byte> b, Deadline dl) override {
    return b.size() > keep_up_to_ ? Status::Ok() : inner_->Send(d, t, b, dl);
  }
  Result<Message> Recv(int s, int t, Deadline dl) override { return inner_->Recv(s, t, dl); }

 private:
  std::unique_ptr<Communicator> inner_;
  size_t keep_up_to_;
};

// Rank 2 agrees and then sends no chunk: every party of every rank's pipeline stops at the
// deadline, and every later collective is refused at once (its tags come round again: a stale
// chunk must never be taken for a later call's).
TEST(RingCollectives, PipelinedAllReduceStoppedMidwayEndsAtItsDeadlineAndRefusesLaterCalls) {
  auto raw = CreateInprocGroup(3);
  ASSERT_TRUE(raw.ok());
  conformance::Communicators comms;
  for (auto& c : *raw) {
    if (c->rank() == 2) c = std::make_unique<DroppingBackend>(std::move(c), 1024);
    comms.push_back(WithRingCollectives(std::move(c)));
  }
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    std::vector<float> data(size_t{3} << 20, 1.0f);
    Status failed = c.AllReduce(data, ReduceOp::kSum, DeadlineIn(500ms));
    if (failed.code() != StatusCode::kDeadlineExceeded)
      return InternalError("the stopped allreduce: " + failed.ToString());
    std::vector<float> again(size_t{3} << 20, 1.0f);
    Status later = c.AllReduce(again, ReduceOp::kSum, DeadlineIn(60s));
    if (later.code() != StatusCode::kFailedPrecondition)
      return InternalError("the allreduce after it: " + later.ToString());
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

// A sub-group built over point-to-point whose collective failed leaves messages on the sub-group
// tags: its parent then builds no other sub-group (which would reuse them), but its own
// collectives go on.
TEST(RingCollectives, AfterASubGroupCollectiveFailedTheParentBuildsNoOtherSubGroup) {
  auto comms = testing::InprocRingGroup(3);
  std::vector<Status> st = conformance::RunOnRanks(comms, [](Communicator& c) -> Status {
    {
      REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                            c.Split(0, c.rank(), DeadlineIn(60s)));
      if (c.rank() != 2) {  // rank 2 stays out of the sub-group's barrier
        Status s = sub->Barrier(DeadlineIn(200ms));
        if (s.code() != StatusCode::kDeadlineExceeded)
          return InternalError("the sub-group barrier without rank 2: " + s.ToString());
      }
    }
    REEL_RETURN_IF_ERROR(c.Barrier(DeadlineIn(60s)).WithContext("the parent's barrier"));
    if (c.rank() == 2) return Status::Ok();  // its sub-group failed nowhere
    Result<std::unique_ptr<Communicator>> again = c.Split(0, c.rank(), DeadlineIn(60s));
    if (again.status().code() != StatusCode::kFailedPrecondition)
      return InternalError("Split after a failed sub-group collective: " +
                           again.status().ToString());
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
}

}  // namespace
}  // namespace reel::core

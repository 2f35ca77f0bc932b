// In-memory commits (train/commits.h): which state a resume takes, how commits are named, kept,
// found, refused and removed.
#include "train/commits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "reel/core/checkpoint.h"

namespace reel::core {
namespace {

using ChoiceSource = ResumeChoice::Source;

TEST(CommitChoiceTest, NothingAnywhereIsNone) {
  const ResumeChoice c = ChooseNewest(-1, std::vector<int64_t>{-1, -1});
  EXPECT_EQ(c.source, ChoiceSource::kNone);
  EXPECT_EQ(c.step, -1);
}

TEST(CommitChoiceTest, ACommitNewerThanTheDiskIsTakenFromItsLowestHolder) {
  const ResumeChoice c = ChooseNewest(10, std::vector<int64_t>{12, 14, -1, 14});
  EXPECT_EQ(c.source, ChoiceSource::kCommit);
  EXPECT_EQ(c.holder, 1);
  EXPECT_EQ(c.step, 14);
}

TEST(CommitChoiceTest, TheDiskWinsWhenNoCommitIsNewer) {
  for (int64_t commit : {-1, 4, 10}) {  // none, older, the same step
    const ResumeChoice c = ChooseNewest(10, std::vector<int64_t>{commit, commit});
    EXPECT_EQ(c.source, ChoiceSource::kDisk) << commit;
    EXPECT_EQ(c.step, 10) << commit;
    EXPECT_EQ(c.holder, -1) << commit;
  }
}

TEST(CommitChoiceTest, ACommitWithoutAnyCheckpointIsTaken) {
  const ResumeChoice c = ChooseNewest(-1, std::vector<int64_t>{-1, 6});
  EXPECT_EQ(c.source, ChoiceSource::kCommit);
  EXPECT_EQ(c.holder, 1);
  EXPECT_EQ(c.step, 6);
}

TEST(CommitPrefixTest, EveryAttemptOfALaunchSharesItAndOtherDirectoriesOrJobsDoNot) {
  const std::string p = CommitPrefix("launch-ab12", "/ckpt");
  EXPECT_EQ(p.rfind("reel-commit.launch-ab12.", 0), 0u) << p;
  EXPECT_EQ(CommitPrefix("launch-ab12.restart-3", "/ckpt"), p);
  EXPECT_NE(CommitPrefix("launch-ab12", "/other"), p);
  EXPECT_NE(CommitPrefix("launch-cd34", "/ckpt"), p);
  EXPECT_EQ(CommitPrefix("", "/ckpt").rfind("reel-commit.nojob.", 0), 0u);
  EXPECT_EQ(CommitPrefix("a/b:c", "/ckpt").rfind("reel-commit.a_b_c.", 0), 0u);
}

std::string EncodedCommitOfStep(int64_t step) {
  CheckpointState s;
  s.model_name = "commit_test_model";
  s.step = step;
  s.data_positions = {"p0", "p1"};
  s.world_size = 2;
  return EncodeCheckpoint(s);
}

class CommitStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("reel-commit-store-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  CommitStore Store(int rank, const std::string& job = "job-a") const {
    return CommitStore(dir_, CommitPrefix(job, "/ckpt"), rank);
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string dir_;
};

TEST_F(CommitStoreTest, AWriteReplacesTheRanksCommitAndTheNewestOfAllRanksIsFound) {
  EXPECT_EQ(Store(0).FindNewest().step, -1);  // no directory yet
  ASSERT_TRUE(Store(0).Write(EncodedCommitOfStep(4)).ok());
  ASSERT_TRUE(Store(0).Write(EncodedCommitOfStep(8)).ok());
  ASSERT_TRUE(Store(1).Write(EncodedCommitOfStep(6)).ok());
  EXPECT_EQ(Files().size(), 2u);  // one file per rank, no temporary left
  const CommitStore::Newest n = Store(2).FindNewest();
  EXPECT_EQ(n.step, 8);
  EXPECT_EQ(n.path, Store(0).MyPath());
  EXPECT_EQ(n.bytes, EncodedCommitOfStep(8));
  EXPECT_TRUE(n.refused.empty());
}

TEST_F(CommitStoreTest, ACorruptCommitIsRefusedNamedAndTheNextNewestTaken) {
  ASSERT_TRUE(Store(0).Write(EncodedCommitOfStep(8)).ok());
  ASSERT_TRUE(Store(1).Write(EncodedCommitOfStep(6)).ok());
  {  // one bit of the payload, which the checksum covers
    std::fstream f(Store(0).MyPath(), std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(EncodedCommitOfStep(8).size() / 2);
    f.seekg(middle);
    const char c = static_cast<char>(f.get());
    f.seekp(middle);
    f.put(static_cast<char>(c ^ 1));
  }
  const CommitStore::Newest n = Store(0).FindNewest();
  EXPECT_EQ(n.step, 6);
  EXPECT_EQ(n.path, Store(1).MyPath());
  ASSERT_EQ(n.refused.size(), 1u);
  EXPECT_NE(n.refused[0].find("DATA_LOSS"), std::string::npos) << n.refused[0];
  EXPECT_NE(n.refused[0].find(Store(0).MyPath()), std::string::npos) << n.refused[0];

  // Truncated (a rank killed while writing never leaves this under the final name, but a host
  // may) and empty: refused the same way.
  const std::string bytes = EncodedCommitOfStep(9);
  std::ofstream(Store(2).MyPath(), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(Store(3).MyPath(), std::ios::binary) << "";
  const CommitStore::Newest m = Store(0).FindNewest();
  EXPECT_EQ(m.step, 6);
  EXPECT_EQ(m.refused.size(), 3u);
}

TEST_F(CommitStoreTest, AnotherJobsCommitIsNeverReadNorRemoved) {
  ASSERT_TRUE(Store(0, "job-b").Write(EncodedCommitOfStep(100)).ok());
  ASSERT_TRUE(Store(0).Write(EncodedCommitOfStep(4)).ok());
  EXPECT_EQ(Store(1).FindNewest().step, 4);
  EXPECT_EQ(CommitStore(dir_, CommitPrefix("job-a", "/elsewhere"), 0).FindNewest().step, -1);
  Store(1).RemoveAll();
  EXPECT_EQ(Store(0).FindNewest().step, -1);
  EXPECT_EQ(Store(0, "job-b").FindNewest().step, 100);
  EXPECT_EQ(Files().size(), 1u);
}

TEST_F(CommitStoreTest, ATemporaryLeftByAKilledWriterIsIgnoredThenRemoved) {
  ASSERT_TRUE(Store(0).Write(EncodedCommitOfStep(4)).ok());
  std::ofstream(Store(0).MyPath() + ".tmp", std::ios::binary) << EncodedCommitOfStep(8);
  const CommitStore::Newest n = Store(0).FindNewest();
  EXPECT_EQ(n.step, 4);
  EXPECT_TRUE(n.refused.empty());
  Store(0).RemoveAll();
  EXPECT_TRUE(Files().empty());
}

}  // namespace
}  // namespace reel::core

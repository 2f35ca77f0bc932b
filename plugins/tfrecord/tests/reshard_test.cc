// Resuming the tfrecord source on another number of ranks: every record of the interrupted epoch
// is read exactly once across the old and the new ranks, for by-file and by-record sharding,
// with and without shuffling, twice in a row; and the positions it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "consumed_set.h"
#include "local_storage.h"
#include "synth.h"
#include "test_util.h"
#include "tfrecord_source.h"

namespace reel::tfrecord {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kVideos = 37;

class ReshardTest : public ::testing::Test {
 public:
  // Sources for every rank of `world`.
  std::vector<std::unique_ptr<DataSource>> Ranks(const std::string& files, int world,
                                                 const std::string& shuffle = "0") {
    std::vector<std::unique_ptr<DataSource>> out;
    for (int rank = 0; rank < world; ++rank) {
      auto options = ParseOptions(TfRecordSourceSchema(),
                                  {{"files", files},
                                   {"features", "rgb:16,audio:8"},
                                   {"num_classes", "12"},
                                   {"batch_size", "3"},
                                   {"prefetch", rank % 2 ? "2" : "0"},
                                   {"shuffle_buffer", shuffle}},
                                  "data");
      EXPECT_TRUE(options.ok()) << options.status();
      auto src = CreateTfRecordSource(*options, {{rank, world}, 9, &resolver_});
      EXPECT_TRUE(src.ok()) << src.status();
      out.push_back(std::move(*src));
    }
    return out;
  }
  void WriteShards(const std::string& dir, int64_t shards) {
    SynthOptions o;
    o.out = dir;
    o.videos = kVideos;
    o.classes = 12;
    o.shards = shards;
    o.min_frames = 2;
    o.max_frames = 5;
    o.rgb_dim = 16;
    o.audio_dim = 8;
    o.seed = 5;
    ASSERT_TRUE(WriteSynthetic(resolver_, o).ok());
  }
  reel::testing::LocalResolver resolver_;
  reel::testing::TempDir dir_;
};

// Takes up to `batches` batches from `src` into `seen`; returns the records taken.
int64_t Take(DataSource& src, int batches, std::map<std::string, int>& seen) {
  int64_t n = 0;
  for (int i = 0; i < batches; ++i) {
    Result<Batch> b = src.Next();
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kOutOfRange) << b.status();
      break;
    }
    for (const std::string& id : b->ids) ++seen[id];
    n += b->size();
  }
  return n;
}

std::vector<std::string> Positions(const std::vector<std::unique_ptr<DataSource>>& ranks) {
  std::vector<std::string> out;
  for (const auto& r : ranks) {
    auto p = r->Position();
    EXPECT_TRUE(p.ok()) << p.status();
    out.push_back(*p);
  }
  return out;
}

// Epoch 1 read by `worlds[0]` ranks (rank r takes r+1 batches), resumed on `worlds[1]` ranks
// (each takes one batch), resumed on `worlds[2]` ranks that read the rest: every record once.
void ExpectEachRecordOnce(ReshardTest& t, const std::string& files, const std::string& shuffle,
                          const std::vector<int>& worlds) {
  const std::string what = files + " shuffle " + shuffle + " worlds " + std::to_string(worlds[0]) +
                           ">" + std::to_string(worlds[1]) + ">" + std::to_string(worlds[2]);
  std::map<std::string, int> seen;
  auto old = t.Ranks(files, worlds[0], shuffle);
  for (size_t r = 0; r < old.size(); ++r) {
    ASSERT_TRUE(old[r]->StartEpoch(1).ok());
    Take(*old[r], static_cast<int>(r) + 1, seen);
  }
  std::vector<std::string> positions = Positions(old);
  for (int step = 1; step < 3; ++step) {
    auto now = t.Ranks(files, worlds[step], shuffle);
    std::vector<int64_t> shares;
    for (auto& src : now) {
      ASSERT_TRUE(src->RestoreResharded(positions).ok()) << what;
      shares.push_back(Take(*src, step == 1 ? 1 : 1000, seen));
    }
    if (step == 2) {  // the rest, split evenly
      auto [lo, hi] = std::minmax_element(shares.begin(), shares.end());
      EXPECT_LE(*hi - *lo, 1) << what;
    }
    positions = Positions(now);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kVideos)) << what;
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " " << what;
}

TEST_F(ReshardTest, EveryRecordOfTheEpochIsReadExactlyOnce) {
  reel::testing::TempDir one_file;
  WriteShards(dir_.path(), 4);
  WriteShards(one_file.path(), 1);
  for (const std::string& files : {dir_ / "*.tfrecord", one_file / "*.tfrecord"})
    for (const char* shuffle : {"0", "5"})
      for (const auto& worlds : std::vector<std::vector<int>>{{2, 3, 2}, {3, 2, 1}, {1, 4, 3}})
        ExpectEachRecordOnce(*this, files, shuffle, worlds);
}

// A resharded epoch's position restores on the same rank exactly, and the next epoch is whole.
TEST_F(ReshardTest, ResumedPositionRestoresAndNextEpochIsWhole) {
  WriteShards(dir_.path(), 4);
  const std::string files = dir_ / "*.tfrecord";
  std::map<std::string, int> seen;
  auto old = Ranks(files, 2, "4");
  for (auto& src : old) Take(*src, 2, seen);
  auto now = Ranks(files, 3, "4");
  for (auto& src : now) ASSERT_TRUE(src->RestoreResharded(Positions(old)).ok());
  Take(*now[1], 1, seen);
  auto pos = now[1]->Position();
  ASSERT_TRUE(pos.ok());
  std::map<std::string, int> rest, again;
  Take(*now[1], 1000, rest);
  auto fresh = Ranks(files, 3, "4");
  ASSERT_TRUE(fresh[1]->Restore(*pos).ok()) << *pos;
  Take(*fresh[1], 1000, again);
  EXPECT_EQ(again, rest);
  std::map<std::string, int> next;
  for (auto& src : now) {
    ASSERT_TRUE(src->StartEpoch(2).ok());
    Take(*src, 1000, next);
  }
  EXPECT_EQ(next.size(), static_cast<size_t>(kVideos));
}

// Ranks that stepped independently (async_sgd's workers) stop in different epochs: the earliest
// resumes, the part of it a rank still in it had not read is read once, a rank already past it
// had read all of its share, and what that rank had read of its own epoch is read again.
TEST_F(ReshardTest, PositionsInDifferentEpochsResumeTheEarliest) {
  WriteShards(dir_.path(), 4);
  const std::string files = dir_ / "*.tfrecord";
  for (const char* shuffle : {"0", "5"}) {
    auto old = Ranks(files, 3, shuffle);
    std::map<std::string, int> seen;  // epoch 2, as read by the old ranks
    ASSERT_TRUE(old[0]->StartEpoch(2).ok());
    Take(*old[0], 2, seen);  // rank 0 in epoch 2
    ASSERT_TRUE(old[1]->StartEpoch(2).ok());
    Take(*old[1], 1000, seen);  // rank 1 read all of its share of epoch 2 ...
    ASSERT_TRUE(old[1]->StartEpoch(3).ok());
    std::map<std::string, int> ahead;
    Take(*old[1], 1, ahead);  // ... and some of epoch 3
    ASSERT_TRUE(old[2]->StartEpoch(4).ok());
    auto whole = Ranks(files, 3, shuffle);  // rank 2's share of epoch 2, all read
    ASSERT_TRUE(whole[2]->StartEpoch(2).ok());
    Take(*whole[2], 1000, seen);
    const std::vector<std::string> positions = Positions(old);
    auto now = Ranks(files, 2, shuffle);
    for (auto& src : now) {
      ASSERT_TRUE(src->RestoreResharded(positions).ok()) << shuffle;
      Take(*src, 1000, seen);
      EXPECT_THAT(*src->Position(), HasSubstr(" epoch=2 ")) << shuffle;
    }
    ASSERT_EQ(seen.size(), static_cast<size_t>(kVideos)) << shuffle;
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " shuffle " << shuffle;
    // The next epoch is whole again, the records rank 1 had read of it included.
    std::map<std::string, int> next;
    for (auto& src : now) {
      ASSERT_TRUE(src->StartEpoch(3).ok());
      Take(*src, 1000, next);
    }
    EXPECT_EQ(next.size(), static_cast<size_t>(kVideos));
    for (const auto& [id, n] : ahead) EXPECT_EQ(next[id], 1) << id;
  }
}

TEST_F(ReshardTest, ForeignOrInconsistentPositionsAreRefused) {
  WriteShards(dir_.path(), 2);
  const std::string files = dir_ / "*.tfrecord";
  auto two = Ranks(files, 2);
  std::vector<std::string> good = Positions(two);
  auto three = Ranks(files, 3);
  auto refused = [&](std::vector<std::string> positions, const std::string& why) {
    Status s = three[0]->RestoreResharded(positions);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(why));
  };
  refused({}, "no positions");
  refused({good[0]}, "position 0 of 1 is rank 0 of 2");
  refused({good[1], good[0]}, "position 0 of 2 is rank 1 of 2");
  refused({good[0], "garbage"}, "'garbage' is not a tfrecord position");
  auto shuffled = Ranks(files, 2, "3");
  refused(Positions(shuffled), "other files, features, seed or shuffle options");
  refused({"tfrecord/v1 fp=0000000000000001 epoch=0 records=0", good[1]}, "predates");
  std::string bad_set = good[1];
  bad_set.replace(bad_set.find("consumed=-"), 10, "consumed=7:0-2");
  refused({good[0], bad_set}, "different parts of epoch 0");
  // Restore() takes only this rank's own position, and says what to use instead.
  Status s = three[0]->Restore(good[0]);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("RestoreResharded"));
}

TEST(ConsumedSetTest, RangesMergeAndRoundTrip) {
  ConsumedSet set;
  for (uint64_t r : {5, 3, 4, 9, 0, 8, 7}) set.Insert(2, r);
  set.Insert(0, 1);
  EXPECT_EQ(set.Encode(), "0:1-2/2:0-1,3-6,7-10");
  EXPECT_EQ(set.size(), 8);
  EXPECT_TRUE(set.Contains(2, 9));
  EXPECT_FALSE(set.Contains(2, 6));
  EXPECT_FALSE(set.Contains(1, 1));
  auto back = ConsumedSet::Decode(set.Encode(), 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, set);
  EXPECT_TRUE(ConsumedSet::Decode("-", 0)->empty());
  for (const char* bad : {"", "x", "0:", "0:2-1", "0:1-3,2-4", "1:0-1/0:0-1", "3:0-1", "0:1-2;"})
    EXPECT_EQ(ConsumedSet::Decode(bad, 3).status().code(), StatusCode::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace reel::tfrecord

// async_sgd on inproc ranks as threads, without a model: workers push known gradients, so what
// the servers hold can be computed exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "ranks.h"
#include "reel/core/host.h"

namespace reel::async_sgd {
namespace {

using ::testing::HasSubstr;

class OneWorker : public ::testing::TestWithParam<std::string> {};
void ExpectThePlainRule(const std::map<std::string, std::string>& options);

// One worker, locking, pulling every step: the server applies exactly the worker's gradient with
// the worker's rate, so the worker's copy follows the plain rule step for step, bit for bit; with
// the push and the pull pipelined in one chunk (the default here), in chunks of 5 floats (the
// last one short), and one after the other (pipeline: false); without and with weight decay.
TEST_P(OneWorker, EqualsThePlainRuleStepForStep) {
  for (const char* decay : {"0", "0.1"})
    for (const char* chunk : {"", "5", "off"}) {
      SCOPED_TRACE(std::string("weight_decay ") + decay + ", pipeline_chunk " + chunk);
      std::map<std::string, std::string> options = {{"rule", GetParam()}, {"weight_decay", decay}};
      if (std::string(chunk) == "off") {
        options["pipeline"] = "false";
      } else if (*chunk != '\0') {
        options["pipeline_chunk"] = chunk;
      }
      ExpectThePlainRule(options);
    }
}

void ExpectThePlainRule(const std::map<std::string, std::string>& options) {
  const std::string rule = options.at("rule");
  Communicators comms = Group(2);
  std::vector<ParamArena> arenas(2);
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  for (size_t i = 0; i < total; ++i) arenas[0].values()[i] = 0.01f * static_cast<float>(i);
  std::vector<float> want(arenas[0].values().begin(), arenas[0].values().end());
  UpdateRuleConfig ref_config;
  ref_config.rule = rule;
  ref_config.weight_decay = std::stod(options.at("weight_decay"));
  auto ref = MakeUpdateRule(ref_config);
  ASSERT_TRUE(ref.ok());
  constexpr int kSteps = 6;
  std::vector<std::vector<float>> seen(kSteps);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), 2));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    if (opt->IsServerOnly()) {
      REEL_RETURN_IF_ERROR(opt->Serve());
      return opt->Finish();
    }
    for (int step = 0; step < kSteps; ++step) {
      for (size_t i = 0; i < total; ++i) arena.grads()[i] = SmoothGrad(step, i);
      REEL_RETURN_IF_ERROR(opt->Step(0.05f));
      seen[step].assign(arena.values().begin(), arena.values().end());
    }
    return opt->Finish();
  });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  std::vector<float> g(total);
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < total; ++i) g[i] = SmoothGrad(step, i);
    (*ref)->Apply(want, g, 0.05f);
    ASSERT_EQ(seen[step], want) << rule << ", step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, OneWorker, ::testing::Values("sgd", "momentum", "adagrad", "adam"));

struct ManyCase {
  int world;
  std::map<std::string, std::string> options;
  const char* name;
};

class ManyWorkers : public ::testing::TestWithParam<ManyCase> {};

// Several workers push at once; with sgd, lr 1 and integer gradients the final parameters are
// the initial ones minus the sum of every gradient pushed, exactly, in any order: a push lost or
// applied twice shows. The servers' counts match the workers'.
TEST_P(ManyWorkers, EveryPushIsAppliedExactlyOnce) {
  const ManyCase& tc = GetParam();
  std::map<std::string, std::string> options = tc.options;
  options["rule"] = "sgd";
  const int n = tc.world;
  Communicators comms = Group(n);
  std::vector<ParamArena> arenas(static_cast<size_t>(n));
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  constexpr int kSteps = 9;
  const int push_every = options.count("push_every") ? std::stoi(options["push_every"]) : 1;
  std::vector<int64_t> sent(static_cast<size_t>(n), 0), applied(static_cast<size_t>(n), 0);
  std::vector<int> trains(static_cast<size_t>(n), 0);
  std::vector<float> held(total, 0.0f);  // the servers' shards, put together
  int shards = 0;
  std::mutex mu;
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    const size_t r = static_cast<size_t>(c.rank());
    ParamArena& arena = arenas[r];
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), n));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    if (opt->IsServerOnly()) {
      REEL_RETURN_IF_ERROR(opt->Serve());
    } else {
      trains[r] = 1;
      for (int step = 0; step < kSteps; ++step) {
        for (size_t i = 0; i < total; ++i) arena.grads()[i] = IntGrad(c.rank(), step, i);
        REEL_RETURN_IF_ERROR(opt->Step(1.0f));
      }
    }
    REEL_RETURN_IF_ERROR(opt->Finish());
    std::lock_guard<std::mutex> lock(mu);
    if (opt->worker()) sent[r] = opt->worker()->pushes_sent();
    if (const ShardServer* server = opt->server()) {
      ++shards;
      for (const auto& t : server->tallies()) {
        EXPECT_TRUE(t.done) << "worker " << t.worker;
        EXPECT_EQ(t.lost, "") << "worker " << t.worker;
        applied[static_cast<size_t>(t.worker)] += t.applied;
      }
      const ShardRange range = ShardOf(static_cast<int64_t>(total), opt->shards(), c.rank());
      std::vector<float> v = server->values();
      std::copy(v.begin(), v.end(), held.begin() + range.offset);
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  // Every push goes to every shard.
  for (int r = 0; r < n; ++r) {
    if (!trains[r]) continue;
    EXPECT_EQ(sent[r], (kSteps + push_every - 1) / push_every) << "worker " << r;
    EXPECT_EQ(applied[r], sent[r] * shards) << "worker " << r;
  }
  // The initial values are rank 0's zeros; each push is the mean of up to push_every steps.
  std::vector<float> want(total, 0.0f);
  for (int r = 0; r < n; ++r) {
    if (!trains[r]) continue;
    for (int first = 0; first < kSteps; first += push_every) {
      const int last = std::min(kSteps, first + push_every);
      for (size_t i = 0; i < total; ++i) {
        float sum = 0.0f;
        for (int step = first; step < last; ++step) sum += IntGrad(r, step, i);
        want[i] -= sum * (1.0f / static_cast<float>(last - first));
      }
    }
  }
  EXPECT_EQ(held, want);
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, ManyWorkers,
    ::testing::Values(
        ManyCase{3, {}, "one_server_two_workers"},
        ManyCase{5, {{"servers", "2"}}, "two_servers_three_workers"},
        ManyCase{3, {{"colocated", "true"}}, "colocated_three"},
        ManyCase{4, {{"push_every", "2"}, {"pull_every", "3"}}, "push2_pull3"},
        // The exchange on a thread of its own while the next step computes.
        ManyCase{3, {{"overlap", "true"}}, "overlap_two_workers"},
        ManyCase{5,
                 {{"overlap", "true"}, {"servers", "2"}, {"push_every", "2"}, {"pull_every", "3"}},
                 "overlap_two_servers_push2_pull3"},
        // Push and pull pipelined in chunks of 4 floats (shards of 11: the last chunk short);
        // then one after the other.
        ManyCase{5, {{"servers", "2"}, {"pipeline_chunk", "4"}}, "pipelined_two_servers"},
        ManyCase{5,
                 {{"overlap", "true"}, {"servers", "2"}, {"pipeline_chunk", "4"}},
                 "pipelined_overlap_two_servers"},
        ManyCase{4, {{"pipeline", "false"}}, "push_then_pull"}),
    [](const auto& info) { return std::string(info.param.name); });

// Runs `steps` steps of IntGrad on every worker of a world of `n` (rank 0 the server) and returns
// each rank's optimizer after Finish, with the server's shard values in `held`.
std::vector<std::unique_ptr<AsyncOptimizer>> RunWorld(
    int n, const std::map<std::string, std::string>& options, int steps, std::vector<float>* held) {
  Communicators comms = Group(n);
  std::vector<ParamArena> arenas(static_cast<size_t>(n));
  for (auto& a : arenas) Declare(a);
  std::vector<std::unique_ptr<AsyncOptimizer>> opts(static_cast<size_t>(n));
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), n));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    if (opt->IsServerOnly()) {
      REEL_RETURN_IF_ERROR(opt->Serve());
    } else {
      for (int step = 0; step < steps; ++step) {
        for (size_t i = 0; i < arena.grads().size(); ++i)
          arena.grads()[i] = IntGrad(c.rank(), step, i);
        REEL_RETURN_IF_ERROR(opt->Step(1.0f));
      }
    }
    REEL_RETURN_IF_ERROR(opt->Finish());
    if (opt->server() && held) *held = opt->server()->values();
    opts[static_cast<size_t>(c.rank())] = std::move(opt);
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  return opts;
}

// One worker pulling every third step: its pushes are 0, 1 and 2 versions stale, so with the
// staleness-aware rate the third of every three counts half (1 / 2), the others fully. With
// `overlap` a gradient is computed on the weights before the newest pull, and its push says so:
// step 3's gradient was computed on the initial weights (version 0) when the shard is at version 3,
// so it counts a third (the pull of step 2 is put in place only after it).
TEST(AsyncSgdStaleness, AwareRateDividesByStaleness) {
  for (bool overlap : {false, true})
    for (bool aware : {false, true}) {
      SCOPED_TRACE(std::string("overlap ") + (overlap ? "true" : "false") + ", aware " +
                   (aware ? "true" : "false"));
      std::vector<float> held;
      RunWorld(2,
               {{"rule", "sgd"},
                {"pull_every", "3"},
                {"overlap", overlap ? "true" : "false"},
                {"staleness_aware", aware ? "true" : "false"}},
               6, &held);
      ASSERT_FALSE(held.empty());
      const std::vector<float> factor = overlap ? std::vector<float>{1, 1, 0.5f, 1.0f / 3, 1, 0.5f}
                                                : std::vector<float>{1, 1, 0.5f, 1, 1, 0.5f};
      for (size_t i = 0; i < held.size(); ++i) {
        float want = 0.0f;
        for (int step = 0; step < 6; ++step)
          want -= IntGrad(1, step, i) * (aware ? factor[static_cast<size_t>(step)] : 1.0f);
        ASSERT_EQ(held[i], want) << "float " << i;
      }
    }
}

// max_staleness 1 with one worker: a push whose gradient is more than one update behind its
// shard is refused before anything of it is applied, and the worker pulls before its next step.
// The counts and the shard's values are exact, on every path of the exchange.
struct StaleCase {
  std::map<std::string, std::string> options;
  std::vector<int> applied_steps;  // the steps whose pushes count
  int64_t pulls, forced_pulls;
  const char* name;
};

void PrintTo(const StaleCase& c, std::ostream* os) { *os << c.name; }

class MaxStaleness : public ::testing::TestWithParam<StaleCase> {};

TEST_P(MaxStaleness, APushStalerThanTheBoundIsRefusedBeforeItIsApplied) {
  const StaleCase& tc = GetParam();
  std::map<std::string, std::string> options = tc.options;
  options["rule"] = "sgd";
  options["max_staleness"] = "1";
  constexpr int kSteps = 6;
  std::vector<float> held;
  auto opts = RunWorld(2, options, kSteps, &held);
  ASSERT_NE(opts[0], nullptr);
  ASSERT_NE(opts[1], nullptr);
  const auto tallies = opts[0]->server()->tallies();
  ASSERT_EQ(tallies.size(), 1u);
  const int64_t applied = static_cast<int64_t>(tc.applied_steps.size());
  EXPECT_EQ(tallies[0].applied, applied);
  EXPECT_EQ(tallies[0].refused, kSteps - applied);
  EXPECT_EQ(opts[0]->server()->version(), applied) << "a refused push is not an update";
  const Worker& w = *opts[1]->worker();
  EXPECT_EQ(w.refused_pushes(), kSteps - applied);
  EXPECT_EQ(w.pulls(), tc.pulls);
  EXPECT_EQ(w.forced_pulls(), tc.forced_pulls);
  for (size_t i = 0; i < held.size(); ++i) {
    float want = 0.0f;
    for (int step : tc.applied_steps) want -= IntGrad(1, step, i);
    ASSERT_EQ(held[i], want) << "float " << i;
  }
}

// Without overlap, pulling every third step: steps 0, 1 and 2 are 0, 1 and 2 updates stale, so
// step 2 is refused (and 5 likewise); its scheduled pull brings the copy up to date. Never
// pulling on schedule, the refusal itself makes the worker pull (a forced pull). With overlap,
// pulling every second step: step 2's gradient was computed on the initial weights (the pull of
// step 1 is put in place after it) when the shard is at version 2: refused; the rest are at most
// one behind.
INSTANTIATE_TEST_SUITE_P(
    Paths, MaxStaleness,
    ::testing::Values(
        StaleCase{{{"pull_every", "3"}}, {0, 1, 3, 4}, 2, 0, "pipelined"},
        StaleCase{
            {{"pull_every", "3"}, {"pipeline", "false"}}, {0, 1, 3, 4}, 2, 0, "push_then_pull"},
        StaleCase{{{"pull_every", "1000"}}, {0, 1, 3, 4}, 2, 2, "forced_pulls"},
        StaleCase{
            {{"pull_every", "2"}, {"overlap", "true"}}, {0, 1, 3, 4, 5}, 3, 0, "overlap_pipelined"},
        StaleCase{{{"pull_every", "2"}, {"overlap", "true"}, {"pipeline", "false"}},
                  {0, 1, 3, 4, 5},
                  3,
                  0,
                  "overlap_push_then_pull"}),
    [](const auto& info) { return std::string(info.param.name); });

// Hogwild (locking: false). One worker has nobody to race with, so its shard is exactly the plain
// sgd of its gradients; with three workers every push is applied and counted as one version, and
// a float that lost a concurrent update still holds the sum of some of its gradients.
TEST(AsyncSgdHogwild, AppliesEveryPushWithoutTheLock) {
  std::vector<float> alone;
  RunWorld(2, {{"rule", "sgd"}, {"locking", "false"}}, 9, &alone);
  ASSERT_FALSE(alone.empty());
  for (size_t i = 0; i < alone.size(); ++i) {
    float want = 0.0f;
    for (int step = 0; step < 9; ++step) want -= IntGrad(1, step, i);
    ASSERT_EQ(alone[i], want) << "float " << i;
  }
  std::vector<float> held;
  auto opts = RunWorld(4, {{"rule", "sgd"}, {"locking", "false"}}, 9, &held);
  ASSERT_NE(opts[0], nullptr);
  for (const auto& t : opts[0]->server()->tallies()) {
    EXPECT_TRUE(t.done);
    EXPECT_EQ(t.applied, 9) << "worker " << t.worker;
  }
  EXPECT_EQ(opts[0]->server()->version(), 27);
  // Each float ends between the most negative and the most positive partial sum of its 27
  // gradients: what any interleaving (updates lost or not) can leave.
  for (size_t i = 0; i < held.size(); ++i) {
    float low = 0.0f, high = 0.0f;
    for (int r = 1; r < 4; ++r)
      for (int step = 0; step < 9; ++step) {
        const float g = -IntGrad(r, step, i);
        (g < 0 ? low : high) += g;
      }
    EXPECT_GE(held[i], low) << "float " << i;
    EXPECT_LE(held[i], high) << "float " << i;
  }
}

// Downpour's client as Dean et al. (2012) publish it (apply_locally): every step's gradient
// updates the local copy at once, the sum of the gradients since the last push goes out every
// push_every (n_push = 3) steps and the copy is fetched afresh every pull_every (n_fetch = 2)
// steps. With sgd, lr 1 and integer gradients, the worker's copy after each step and the server's
// shard at the end are exact.
TEST(AsyncSgdDownpour, AppliesLocallyPushesTheSumFetchesOnItsOwnCadence) {
  const std::map<std::string, std::string> options = {
      {"rule", "sgd"}, {"apply_locally", "true"}, {"push_every", "3"}, {"pull_every", "2"}};
  constexpr int kSteps = 7;
  Communicators comms = Group(2);
  std::vector<ParamArena> arenas(2);
  for (auto& a : arenas) Declare(a);
  const size_t total = static_cast<size_t>(arenas[0].total_size());
  std::vector<std::vector<float>> seen(kSteps);
  std::vector<float> held;
  int64_t pushes = 0, pulls = 0;
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), 2));
    REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
    if (opt->IsServerOnly()) {
      REEL_RETURN_IF_ERROR(opt->Serve());
      REEL_RETURN_IF_ERROR(opt->Finish());
      held = opt->server()->values();
      return Status::Ok();
    }
    for (int step = 0; step < kSteps; ++step) {
      for (size_t i = 0; i < total; ++i) arena.grads()[i] = IntGrad(1, step, i);
      REEL_RETURN_IF_ERROR(opt->Step(1.0f));
      seen[static_cast<size_t>(step)].assign(arena.values().begin(), arena.values().end());
    }
    REEL_RETURN_IF_ERROR(opt->Finish());  // pushes the sum of the 7th step's gradient
    pushes = opt->worker()->pushes_sent();
    pulls = opt->worker()->pulls();
    return Status::Ok();
  });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  // The published client, step by step: local, server and the pending sum.
  std::vector<float> local(total, 0.0f), server(total, 0.0f), pending(total, 0.0f);
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < total; ++i) {
      local[i] -= IntGrad(1, step, i);
      pending[i] += IntGrad(1, step, i);
    }
    if ((step + 1) % 3 == 0) {
      for (size_t i = 0; i < total; ++i) server[i] -= pending[i];
      std::fill(pending.begin(), pending.end(), 0.0f);
    }
    if ((step + 1) % 2 == 0) local = server;
    ASSERT_EQ(seen[static_cast<size_t>(step)], local) << "step " << step;
  }
  for (size_t i = 0; i < total; ++i) server[i] -= pending[i];
  EXPECT_EQ(held, server);
  EXPECT_EQ(pushes, 3);  // after steps 3 and 6, and the 7th's at Finish
  EXPECT_EQ(pulls, 3);   // after steps 2, 4 and 6
}

// Each refused by the factory, before any rank communicates or opens data.
TEST(AsyncSgdBadInput, RefusedBeforeTrainingWithTheOptionNamed) {
  struct Case {
    std::map<std::string, std::string> options;
    int world;
    const char* says;
  };
  const Case cases[] = {
      {{}, 1, "option 'servers': 1 server rank(s) in a world of 1 leave no worker"},
      {{{"servers", "3"}}, 3, "option 'servers': 3 server rank(s) in a world of 3 leave no worker"},
      {{{"servers", "4"}}, 3, "option 'servers': 4 server rank(s) in a world of 3"},
      {{{"servers", "0"}}, 3, "option 'servers': 0 is below 1"},
      {{{"max_staleness", "-1"}}, 3, "option 'max_staleness': -1 is negative"},
      {{{"pull_every", "0"}}, 3, "option 'pull_every': 0 is below 1"},
      {{{"push_every", "-2"}}, 3, "option 'push_every': -2 is below 1"},
      {{{"frequency", "hourly"}}, 3, "option 'frequency': 'hourly' is neither"},
      {{{"locking", "false"}, {"rule", "adam"}},
       3,
       "option 'locking': false (Hogwild) needs rule 'sgd'"},
      {{{"rule", "rmsprop"}}, 3, "unknown update rule 'rmsprop'"},
      {{{"overlap", "true"}, {"frequency", "epoch"}},
       3,
       "option 'overlap': true needs frequency 'step'"},
      {{{"server_checkpoint_every", "-2"}}, 3, "option 'server_checkpoint_every': -2 is below -1"},
      {{{"apply_locally", "true"}, {"overlap", "true"}},
       3,
       "option 'apply_locally': true needs frequency 'step' and overlap false"},
      {{{"apply_locally", "true"}, {"frequency", "epoch"}},
       3,
       "option 'apply_locally': true needs frequency 'step' and overlap false"},
  };
  for (const Case& c : cases) {
    auto made = Make(c.options, 0, c.world);
    ASSERT_FALSE(made.ok()) << c.says;
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(made.status().message(), HasSubstr(c.says));
  }
}

// A model of 16 floats (one padded block) cannot be cut into 17 shards; every rank says so in
// Setup, before its first step, and none waits for the others.
TEST(AsyncSgdBadInput, MoreShardsThanParametersIsRefusedAtSetup) {
  constexpr int kWorld = 18;
  Communicators comms = Group(kWorld);
  std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    ParamArena arena;
    REEL_RETURN_IF_ERROR(arena.Declare("w", {3}).status());
    arena.Finalize();
    REEL_ASSIGN_OR_RETURN(auto opt, Make({{"servers", "17"}}, c.rank(), kWorld));
    return opt->Setup(arena, c);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kInvalidArgument) << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("17 shards for a model of 16 parameter floats"));
  }
}

// The per-shard versions of a state the lead collected (async_optimizer.h: "RASG" | uint32
// format | uint32 shards | per shard uint64 length, int64 version, the rule's state).
std::vector<int64_t> ShardVersions(const std::string& state) {
  std::vector<int64_t> out;
  std::string_view in(state);
  char magic[4];
  uint32_t format = 0, shards = 0;
  if (!TakeBytes(in, magic, 4) || !TakeBytes(in, &format, 4) || !TakeBytes(in, &shards, 4))
    return out;
  for (uint32_t s = 0; s < shards; ++s) {
    uint64_t n = 0;
    int64_t version = -1;
    if (!TakeBytes(in, &n, sizeof n) || n < sizeof version || n > in.size()) return {};
    std::memcpy(&version, in.data(), sizeof version);
    in.remove_prefix(n);
    out.push_back(version);
  }
  return out;
}

// Waits for `f` at most a minute: a rank that failed must not hang the other.
Status Await(std::future<void>& f, const char* what) {
  if (f.wait_for(std::chrono::minutes(1)) != std::future_status::ready)
    return DeadlineExceededError(std::string("the test waited a minute for ") + what);
  return Status::Ok();
}

struct CutCase {
  std::map<std::string, std::string> options;
  const char* name;
};

class Cut : public ::testing::TestWithParam<CutCase> {};

// A periodic checkpoint is one cut: the lead takes it as the trainer does (Refresh, then
// SaveState, then the parameters from its arena) while worker 3 keeps pushing. Every push
// adds exactly 1 to every parameter of every shard (sgd, lr 1, gradients -1, from zeros), so a
// shard at version v holds v in every float: each shard's values in the arena must equal the
// version its state names. First worker 3 pushes between the lead's Refresh and its
// SaveState (before, the arena held the pulled values, the state the later version), then
// during it. A resume from the first cut restores exactly it: every server's version and
// values, and what the workers pull.
TEST_P(Cut, APeriodicCheckpointIsOneCutOfEveryShardAndResumesExactly) {
  constexpr int kWorld = 4, kLead = 2, kOther = 3, kBefore = 3, kBetween = 4, kDuring = 40;
  std::map<std::string, std::string> options = GetParam().options;
  options["rule"] = "sgd";
  options["servers"] = "2";
  std::promise<void> refreshed, pushed, collected;
  std::future<void> refreshed_f = refreshed.get_future(), pushed_f = pushed.get_future(),
                    collected_f = collected.get_future();
  struct Taken {
    std::string state;
    std::vector<float> values;
  };
  std::vector<Taken> cuts;
  int64_t total = 0;
  auto step = [](AsyncOptimizer& opt, ParamArena& arena) {
    std::fill(arena.grads().begin(), arena.grads().end(), -1.0f);
    return opt.Step(1.0f);
  };
  {
    Communicators comms = Group(kWorld);
    std::vector<ParamArena> arenas(kWorld);
    for (auto& a : arenas) Declare(a);
    total = arenas[0].total_size();
    std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
      ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
      REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), kWorld));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
      if (opt->IsServerOnly()) return opt->Serve();
      if (c.rank() == kLead) {
        for (int i = 0; i < kBefore; ++i) REEL_RETURN_IF_ERROR(step(*opt, arena));
        auto take = [&]() -> Status {
          REEL_ASSIGN_OR_RETURN(std::string state, opt->SaveState());
          cuts.push_back({std::move(state), {arena.values().begin(), arena.values().end()}});
          return Status::Ok();
        };
        REEL_RETURN_IF_ERROR(opt->Refresh());
        refreshed.set_value();
        REEL_RETURN_IF_ERROR(Await(pushed_f, "worker 3's pushes"));
        REEL_RETURN_IF_ERROR(take());
        collected.set_value();
        for (int i = 0; i < 5; ++i) REEL_RETURN_IF_ERROR(take());
        return opt->Finish();
      }
      REEL_RETURN_IF_ERROR(Await(refreshed_f, "the lead's refresh"));
      for (int i = 0; i < kBetween; ++i) REEL_RETURN_IF_ERROR(step(*opt, arena));
      REEL_RETURN_IF_ERROR(opt->Refresh());  // with overlap, the last push is applied only then
      pushed.set_value();
      REEL_RETURN_IF_ERROR(Await(collected_f, "the lead's first cut"));
      for (int i = 0; i < kDuring; ++i) REEL_RETURN_IF_ERROR(step(*opt, arena));
      return opt->Finish();
    });
    for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  }
  ASSERT_EQ(cuts.size(), 6u);
  for (size_t i = 0; i < cuts.size(); ++i) {
    const std::vector<int64_t> versions = ShardVersions(cuts[i].state);
    ASSERT_EQ(versions.size(), 2u) << "cut " << i;
    for (int s = 0; s < 2; ++s) {
      const ShardRange r = ShardOf(total, 2, s);
      const std::vector<float> values(cuts[i].values.begin() + r.offset,
                                      cuts[i].values.begin() + r.offset + r.size);
      EXPECT_EQ(values, std::vector<float>(static_cast<size_t>(r.size),
                                           static_cast<float>(versions[static_cast<size_t>(s)])))
          << "cut " << i << ", shard " << s << " at version " << versions[static_cast<size_t>(s)];
    }
  }
  const std::vector<int64_t> saved = ShardVersions(cuts[0].state);
  EXPECT_EQ(saved, (std::vector<int64_t>{kBefore + kBetween, kBefore + kBetween}));

  // The resume, as the trainer does it: every rank's parameters from the checkpoint, Setup, then
  // the state.
  std::vector<int64_t> restored_versions(2, -1);
  std::vector<std::vector<float>> restored_values(2), pulled(kWorld);
  {
    Communicators comms = Group(kWorld);
    std::vector<ParamArena> arenas(kWorld);
    for (auto& a : arenas) {
      Declare(a);
      std::copy(cuts[0].values.begin(), cuts[0].values.end(), a.values().begin());
    }
    std::vector<Status> st = RunOnRanks(comms, [&](Communicator& c) -> Status {
      ParamArena& arena = arenas[static_cast<size_t>(c.rank())];
      REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), kWorld));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
      REEL_RETURN_IF_ERROR(opt->RestoreState(cuts[0].state));
      if (opt->IsServerOnly()) {
        restored_versions[static_cast<size_t>(c.rank())] = opt->server()->version();
        restored_values[static_cast<size_t>(c.rank())] = opt->server()->values();
        return opt->Serve();
      }
      REEL_RETURN_IF_ERROR(opt->Refresh());
      pulled[static_cast<size_t>(c.rank())].assign(arena.values().begin(), arena.values().end());
      return opt->Finish();
    });
    for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  }
  EXPECT_EQ(restored_versions, saved);
  for (int s = 0; s < 2; ++s) {
    const ShardRange r = ShardOf(total, 2, s);
    EXPECT_EQ(restored_values[static_cast<size_t>(s)],
              std::vector<float>(cuts[0].values.begin() + r.offset,
                                 cuts[0].values.begin() + r.offset + r.size))
        << "shard " << s;
  }
  for (int w : {kLead, kOther}) EXPECT_EQ(pulled[static_cast<size_t>(w)], cuts[0].values) << w;
}

// Pipelined push+pull (the default), push then pull, Hogwild (no lock: its updates hold the cut
// off instead), and the exchange overlapped with the next step.
INSTANTIATE_TEST_SUITE_P(Exchanges, Cut,
                         ::testing::Values(CutCase{{}, "pipelined"},
                                           CutCase{{{"pipeline", "false"}}, "push_then_pull"},
                                           CutCase{{{"locking", "false"}}, "hogwild"},
                                           CutCase{{{"overlap", "true"}}, "overlap"}),
                         [](const auto& info) { return std::string(info.param.name); });

// The servers' own checkpoints (shard_checkpoints.h) in a directory of local files.
class ServerCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    auto host = core::Host::Create({});
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    dir_ = ::testing::TempDir() + "async_shards_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  ShardSnapshot Shard(int64_t version, int shard, int shards) {
    return {shard, shards, version, {1.0f, 2.0f}, std::string(8, '\0')};
  }
  OptimizerCheckpoints Offer(bool resume, const std::string& dir = "") {
    return {host_.get(), dir.empty() ? dir_ : dir, 0, 0, resume};
  }
  // Two servers and one worker (rank 2) of a world of kWorld train kSteps steps (sgd, lr 1,
  // integer gradients: exact), each server writing its shard every 3 updates. Returns the state
  // the lead collected after 2 steps (version 2).
  static constexpr int kWorld = 3, kSteps = 9;
  std::map<std::string, std::string> TwoServers() {
    return {{"rule", "sgd"}, {"servers", "2"}, {"server_checkpoint_every", "3"}};
  }
  std::string TrainOnTwoServers() {
    std::string lead_state;
    Communicators comms = Group(kWorld);
    std::vector<ParamArena> arenas(kWorld);
    for (auto& a : arenas) Declare(a);
    auto st = RunOnRanks(comms, [&](Communicator& c) -> Status {
      ParamArena& arena = arenas[c.rank()];
      REEL_ASSIGN_OR_RETURN(auto opt, Make(TwoServers(), c.rank(), kWorld));
      opt->OfferCheckpoints(Offer(false));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
      if (opt->IsServerOnly()) return opt->Serve();
      for (int step = 0; step < kSteps; ++step) {
        if (step == 2) {
          REEL_ASSIGN_OR_RETURN(lead_state, opt->SaveState());
        }
        for (size_t i = 0; i < arena.grads().size(); ++i)
          arena.grads()[i] = IntGrad(c.rank(), step, i);
        REEL_RETURN_IF_ERROR(opt->Step(1.0f));
      }
      return opt->Finish();
    });
    for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    return lead_state;
  }
  // Resumes a world of kWorld with `options` from `lead_state`; the parameters each worker
  // pulled before its first step (empty for a server).
  std::vector<std::vector<float>> ResumeAndPull(const std::map<std::string, std::string>& options,
                                                const std::string& lead_state) {
    Communicators comms = Group(kWorld);
    std::vector<ParamArena> arenas(kWorld);
    for (auto& a : arenas) Declare(a);
    std::vector<std::vector<float>> pulled(kWorld);
    auto st = RunOnRanks(comms, [&](Communicator& c) -> Status {
      ParamArena& arena = arenas[c.rank()];
      REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), kWorld));
      opt->OfferCheckpoints(Offer(true));
      REEL_RETURN_IF_ERROR(opt->Setup(arena, c));
      REEL_RETURN_IF_ERROR(opt->RestoreState(lead_state));
      if (opt->IsServerOnly()) return opt->Serve();
      pulled[c.rank()].assign(arena.values().begin(), arena.values().end());
      return opt->Finish();
    });
    for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    return pulled;
  }
  // The parameters after the first `steps` of rank 2's gradients, from zero.
  static std::vector<float> AfterSteps(int steps, size_t n) {
    std::vector<float> want(n, 0.0f);
    for (int step = 0; step < steps; ++step)
      for (size_t i = 0; i < n; ++i) want[i] -= IntGrad(2, step, i);
    return want;
  }
  std::unique_ptr<core::Host> host_;
  std::string dir_;
};

// A set is complete only when every shard of the same version and layout has its file; each
// layout (number of shards) counts on its own, and other names are not counted.
TEST_F(ServerCheckpoints, ASetIsCompleteOnlyWithEveryShardOfOneVersion) {
  ShardCheckpoints c(*host_, dir_, 0);
  for (auto [v, s] : {std::pair{10, 0}, {10, 1}, {20, 1}, {30, 0}, {30, 1}, {40, 0}})
    ASSERT_TRUE(c.Write(Shard(v, s, 2)).ok());
  ASSERT_TRUE(c.Write(Shard(5, 0, 1)).ok());   // another run's layout: one shard
  ASSERT_TRUE(c.Write(Shard(30, 2, 3)).ok());  // and a third, incomplete
  std::ofstream(dir_ + "/async-shard-v000000000060-0-of-0.rasg") << "no such layout";
  auto sets = c.CompleteSets();
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(*sets, (std::vector<ShardSet>{{5, 1}, {10, 2}, {30, 2}}));
  auto read = c.Read(30, 1, 2);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->values, (std::vector<float>{1.0f, 2.0f}));
  // A file that is not what its name says is refused, naming it.
  std::filesystem::copy_file(dir_ + "/" + ShardFileName(30, 0, 2),
                             dir_ + "/" + ShardFileName(60, 1, 2));
  auto wrong = c.Read(60, 1, 2);
  EXPECT_EQ(wrong.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(wrong.status().message(), HasSubstr(ShardFileName(60, 1, 2)));
  auto garbage = DecodeShard("RASX", "f.rasg");
  EXPECT_EQ(garbage.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(garbage.status().message(), HasSubstr("f.rasg: not an async_sgd shard checkpoint"));
}

// A server keeps its newest max(keep, 2) files: with keep 1 a complete set still survives while
// the next one is being written.
TEST_F(ServerCheckpoints, PruningKeepsAtLeastTwoFilesPerShard) {
  ShardCheckpoints c(*host_, dir_, 1);
  for (int v : {5, 10, 15, 20}) ASSERT_TRUE(c.Write(Shard(v, 0, 1)).ok());
  auto sets = c.CompleteSets();
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(*sets, (std::vector<ShardSet>{{15, 1}, {20, 1}}));
}

// Once a layout has a complete set, another layout's older files can never be taken by a resume
// (it takes the newest complete set of any layout): shard 0 of the newer layout deletes them when
// it writes, and keeps those that are newer.
TEST_F(ServerCheckpoints, AnotherLayoutsOlderFilesGoOnceThisLayoutHasACompleteSet) {
  ShardCheckpoints c(*host_, dir_, 0);
  auto exists = [&](int64_t v, int s, int n) {
    return std::filesystem::exists(dir_ + "/" + ShardFileName(v, s, n));
  };
  for (int s : {0, 1, 2}) ASSERT_TRUE(c.Write(Shard(10, s, 3)).ok());
  for (int s : {0, 1}) ASSERT_TRUE(c.Write(Shard(40, s, 3)).ok());
  ASSERT_TRUE(c.Write(Shard(30, 1, 2)).ok());  // not shard 0, and the set is not complete
  EXPECT_TRUE(exists(10, 0, 3));
  ASSERT_TRUE(c.Write(Shard(30, 0, 2)).ok());  // layout 2 complete at 30
  for (int s : {0, 1, 2}) EXPECT_FALSE(exists(10, s, 3)) << s;
  for (int s : {0, 1}) EXPECT_TRUE(exists(40, s, 3)) << s;
  auto sets = c.CompleteSets();
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(*sets, (std::vector<ShardSet>{{30, 2}}));
}

// Two servers, one worker (sgd, lr 1, integer gradients: exact). Each server writes its shard
// every 3 updates. Shard 1's file of the last set is then removed (its server "died" before
// writing it), and a resume from a lead checkpoint of version 2 takes the newest complete set
// (version 6): the worker pulls exactly the parameters after 6 steps.
TEST_F(ServerCheckpoints, ServersWriteOnTheirCadenceAndResumeTakesTheNewestCompleteSet) {
  const std::string lead_state = TrainOnTwoServers();
  ASSERT_FALSE(lead_state.empty());
  ShardCheckpoints files(*host_, dir_, 0);
  auto sets = files.CompleteSets();
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(*sets, (std::vector<ShardSet>{{3, 2}, {6, 2}, {9, 2}}));
  std::filesystem::remove(dir_ + "/" + ShardFileName(9, 1, 2));

  const std::vector<float> pulled = ResumeAndPull(TwoServers(), lead_state)[2];
  EXPECT_EQ(pulled, AfterSteps(6, pulled.size()));
  // Serving again from version 6 removed the servers' files of the abandoned version 9.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + ShardFileName(9, 0, 2)));
}

// Servers come back fewer (preemptible machines): two servers wrote sets up to version 9, the
// trainer's checkpoint is of version 2, and the resume has one server. It takes the newer set of
// the other layout, cut anew, so no update is lost: the worker pulls exactly the parameters after
// 9 steps. Files newer than that of any layout (here an incomplete set of three servers) belong
// to a history the run abandoned and are deleted when serving starts, so that a later resume
// cannot take them for this run's; the set it resumed from stays. Before, a resume saw only its
// own layout's sets: it fell back to version 2 here, and a later resume on the first layout
// would have taken that layout's stale sets over the newer history.
TEST_F(ServerCheckpoints, ASetOfAnotherNumberOfServersIsCutAnew) {
  const std::string lead_state = TrainOnTwoServers();
  ASSERT_FALSE(lead_state.empty());
  ShardCheckpoints files(*host_, dir_, 0);
  for (int s : {0, 1}) ASSERT_TRUE(files.Write(Shard(12, s, 3)).ok());  // abandoned, incomplete

  std::map<std::string, std::string> one_server = TwoServers();
  one_server["servers"] = "1";
  const std::vector<std::vector<float>> pulled = ResumeAndPull(one_server, lead_state);
  for (int worker : {1, 2})
    EXPECT_EQ(pulled[worker], AfterSteps(kSteps, pulled[worker].size())) << "rank " << worker;
  EXPECT_FALSE(pulled[1].empty());
  for (int s : {0, 1}) {
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + ShardFileName(12, s, 3)));
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + ShardFileName(9, s, 2)));
  }
}

// A resume that found no trainer checkpoint (the trainer then sets up afresh and restores
// nothing) but a complete set of the servers' own files: every rank refuses at its first call,
// naming the directory and the set, and the files are kept. Without a set it starts afresh.
TEST_F(ServerCheckpoints, ASetWithoutATrainerCheckpointIsRefusedNotDeleted) {
  constexpr int kWorld = 3;
  const std::map<std::string, std::string> options = {{"rule", "sgd"}, {"servers", "2"}};
  ParamArena probe;
  Declare(probe);
  ShardCheckpoints c(*host_, dir_, 0);
  for (int s : {0, 1}) {
    const ShardSnapshot shard{s, 2, 12, std::vector<float>(ShardOf(probe.total_size(), 2, s).size),
                              std::string(8, '\0')};
    ASSERT_TRUE(c.Write(shard).ok());
  }
  auto resume = [&](const std::string& dir) {
    Communicators comms = Group(kWorld);
    std::vector<ParamArena> arenas(kWorld);
    for (auto& a : arenas) Declare(a);
    return RunOnRanks(comms, [&](Communicator& c) -> Status {
      REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), kWorld));
      opt->OfferCheckpoints(Offer(true, dir));
      REEL_RETURN_IF_ERROR(opt->Setup(arenas[c.rank()], c));
      if (opt->IsServerOnly()) return opt->Serve();
      REEL_RETURN_IF_ERROR(opt->Refresh());
      return opt->Finish();
    });
  };
  std::vector<Status> st = resume(dir_);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kFailedPrecondition) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("--resume found no trainer checkpoint"));
    EXPECT_THAT(st[r].message(), HasSubstr(dir_));
    EXPECT_THAT(st[r].message(),
                HasSubstr("complete shard set of version 12 (" + ShardFileName(12, 0, 2)));
  }
  for (int s : {0, 1}) EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + ShardFileName(12, s, 2)));
  // An empty directory: nothing to lose, the run starts afresh.
  for (const Status& s : resume(dir_ + "_none")) EXPECT_TRUE(s.ok()) << s;
  std::filesystem::remove_all(dir_ + "_none");
}

// Ranks that see different checkpoint directories (here: rank 0 an empty one) refuse to resume
// from different shards, every rank naming the disagreement.
TEST_F(ServerCheckpoints, RanksThatSeeDifferentSetsRefuseToResume) {
  constexpr int kWorld = 3;
  const std::map<std::string, std::string> options = {{"rule", "sgd"}};
  ShardCheckpoints c(*host_, dir_, 0);
  ParamArena probe;
  Declare(probe);
  const ShardSnapshot shard{0, 1, 7, std::vector<float>(probe.total_size(), 1.0f),
                            std::string(8, '\0')};
  ASSERT_TRUE(c.Write(shard).ok());
  std::string lead_state;
  Communicators comms = Group(kWorld);
  std::vector<ParamArena> arenas(kWorld);
  for (auto& a : arenas) Declare(a);
  auto st = RunOnRanks(comms, [&](Communicator& c) -> Status {
    REEL_ASSIGN_OR_RETURN(auto opt, Make(options, c.rank(), kWorld));
    opt->OfferCheckpoints(Offer(true, c.rank() == 0 ? dir_ + "_empty" : dir_));
    REEL_RETURN_IF_ERROR(opt->Setup(arenas[c.rank()], c));
    // The state of a fresh run: shard 0 at version 0.
    std::string state("RASG\1\0\0\0\1\0\0\0", 12);
    const uint64_t n = 8;
    state.append(reinterpret_cast<const char*>(&n), sizeof n);
    state.append(8, '\0');
    return opt->RestoreState(state);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kFailedPrecondition) << "rank " << r << ": " << st[r];
    EXPECT_THAT(st[r].message(), HasSubstr("every rank must see the same checkpoint directory"));
  }
  std::filesystem::remove_all(dir_ + "_empty");
}

}  // namespace
}  // namespace reel::async_sgd

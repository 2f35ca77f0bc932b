// `reel plugins check FILE.so`: every bundled plugin and the core's built-ins pass; components that
// break a contract fail the check that covers it, naming what was seen; bad arguments are one
// clear line. Bundled plugins not built here (REEL_PLUGINS) are skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>

#include "../common/reel_cli.h"
#ifdef REEL_WITH_S3_TEST_SERVER
#include "s3_test_env.h"
#endif

namespace {

using reel::cli_testing::Bundled;
using reel::cli_testing::CliRun;
using reel::cli_testing::Reel;

const std::string kBroken = REEL_BROKEN_PLUGIN_DIR "/libreel_test_broken.so";
const std::string kTwoTransports = REEL_BROKEN_PLUGIN_DIR "/libreel_test_two_transports.so";

bool Has(const CliRun& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

// Every check passed, and there were `at_least` of them.
void ExpectAllPass(const CliRun& r, int at_least) {
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(Has(r, "FAIL")) << r.output;
  int checks = 0;
  EXPECT_EQ(std::sscanf(r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1).c_str(),
                        "%d checks", &checks),
            1)
      << r.output;
  EXPECT_GE(checks, at_least) << r.output;
  EXPECT_TRUE(Has(r, " 0 failed")) << r.output;
}

#define SKIP_UNLESS_BUILT(name) \
  if (!std::filesystem::exists(Bundled(name))) GTEST_SKIP() << name << " plugin not built"

TEST(PluginsCheckTest, BuiltinsPass) {
  CliRun r = Reel("plugins check --builtins");
  ExpectAllPass(r, 40);
  for (const char* kind :
       {"storage file\n", "optimizer sync\n", "transport inproc\n",
        "pass a write is invisible until Close", "pass SaveState/RestoreState continue exactly",
        "pass CollectiveConformance.MatchSequentialComputation/inproc_3ranks_large"})
    EXPECT_TRUE(Has(r, kind)) << kind << "\n" << r.output;
}

TEST(PluginsCheckTest, ModelPluginsPass) {
  SKIP_UNLESS_BUILT("moe");
  CliRun moe = Reel("plugins check " + Bundled("moe"));
  ExpectAllPass(moe, 15);
  EXPECT_TRUE(Has(moe, "pass gradients match finite differences of the loss")) << moe.output;
  SKIP_UNLESS_BUILT("bilstm");
  CliRun bilstm = Reel("plugins check " + Bundled("bilstm") +
                       " --option bilstm_video.hidden=8 --option bilstm_audio.hidden=8"
                       " --option two_stream.video_hidden=8 --option two_stream.audio_hidden=8");
  ExpectAllPass(bilstm, 25);
  EXPECT_TRUE(Has(bilstm, "model two_stream\n")) << bilstm.output;
}

// The parameter-server optimizer needs a worker on every rank of the check's one- and two-rank
// worlds: colocated.
TEST(PluginsCheckTest, AsyncSgdPassesColocated) {
  SKIP_UNLESS_BUILT("async_sgd");
  CliRun r = Reel("plugins check " + Bundled("async_sgd") + " --option async_sgd.colocated=true");
  ExpectAllPass(r, 4);
  EXPECT_TRUE(Has(r, "pass SaveState/RestoreState continue exactly")) << r.output;
}

TEST(PluginsCheckTest, TfrecordPassesOnSynthesisedShards) {
  SKIP_UNLESS_BUILT("tfrecord");
  const std::string dir = ::testing::TempDir() + "/plugins_check_tfrecord";
  std::filesystem::remove_all(dir);
  CliRun synth = Reel("synth --out " + dir + " --videos 30 --classes 5 --level frame --shards 2");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  CliRun r = Reel("plugins check " + Bundled("tfrecord") + " --option 'tfrecord.files=" + dir +
                  "/*.tfrecord' --option tfrecord.batch_size=4");
  ExpectAllPass(r, 15);
  EXPECT_TRUE(Has(r, "pass two shards read every video once between them")) << r.output;
  EXPECT_TRUE(Has(r, "command synth\n")) << r.output;
  // Without its required option the data source's checks are skipped, saying what to give.
  CliRun bare = Reel("plugins check " + Bundled("tfrecord"));
  EXPECT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_TRUE(Has(bare, "skip data source checks: it needs options: --option tfrecord.files=..."))
      << bare.output;
  std::filesystem::remove_all(dir);
}

TEST(PluginsCheckTest, TcpPassesTheTransportSuite) {
  SKIP_UNLESS_BUILT("tcp");
  CliRun r = Reel("plugins check " + Bundled("tcp") + " --option tcp.secret=check");
  ExpectAllPass(r, 35);
  EXPECT_TRUE(Has(r, "pass TransportConformance.PeerThatLeftIsUnavailableNotAHang/tcp"))
      << r.output;
}

// One rank per process: the same suite over tcp in a world of two processes that `reel launch`
// starts, each running the checks on its own rank (those that need ranks as threads skip).
TEST(PluginsCheckTest, TcpPassesAsAWorldOfProcesses) {
  SKIP_UNLESS_BUILT("tcp");
  CliRun r = Reel("launch -n 2 -- " REEL_BINARY_DIR "/bin/reel plugins check " + Bundled("tcp") +
                  " --world --option tcp.secret=check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
    EXPECT_TRUE(
        Has(r, std::string(rank) +
                   "  pass CollectiveConformance.MatchSequentialComputation/tcp_world_large"))
        << r.output;
    EXPECT_TRUE(Has(r, std::string(rank) +
                           "  skip TransportConformance.LeavingWakesAWaitingReceiver/tcp: "
                           "only with ranks as threads"))
        << r.output;
  }
  EXPECT_FALSE(Has(r, "FAIL")) << r.output;
}

TEST(PluginsCheckTest, RemoteStorageWithoutARootIsSkipped) {
  SKIP_UNLESS_BUILT("s3");
  CliRun r = Reel("plugins check " + Bundled("s3"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r,
                  "skip storage checks: give a writable location of the 's3' storage with "
                  "--root s3://..."))
      << r.output;
}

#ifdef REEL_WITH_S3_TEST_SERVER
// The s3 storage against a real S3 server (s3rver on loopback, as the s3 plugin's tests start it):
// every storage check runs and passes, objects under a fresh folder of the bucket.
TEST(PluginsCheckTest, S3PassesAgainstARealServer) {
  SKIP_UNLESS_BUILT("s3");
  reel::Status error;
  reel::s3::testing::S3rverProcess* server = reel::s3::testing::SharedS3rver(&error);
  ASSERT_NE(server, nullptr) << "cannot start the S3 test server: " << error;
  std::string options;
  for (const std::string& o : {"endpoint=" + server->endpoint(), std::string("addressing=path"),
                               std::string("region=us-east-1"), std::string("access_key_id=S3RVER"),
                               std::string("secret_access_key=S3RVER")})
    options += " --option s3." + o;
  CliRun r = Reel("plugins check " + Bundled("s3") + " --root " + reel::s3::testing::Uri("check") +
                  options);
  ExpectAllPass(r, 10);
  for (const char* check : {"pass a written object reads back whole, with its size",
                            "pass a write is invisible until Close",
                            "pass a writer destroyed without Close leaves nothing",
                            "pass Glob: sorted, '*' '?' '[..]' within one path segment"})
    EXPECT_TRUE(Has(r, check)) << check << "\n" << r.output;
  EXPECT_FALSE(Has(r, "  skip ")) << r.output;
}
#endif

// A plugin may register several transports: the suite runs over each, and each transport's
// outcomes are listed under it, naming it.
TEST(PluginsCheckTest, EveryTransportOfAPluginIsChecked) {
  CliRun r = Reel("plugins check " + kTwoTransports);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const size_t a = r.output.find("transport refusing_a\n");
  const size_t b = r.output.find("transport refusing_b\n");
  ASSERT_NE(a, std::string::npos) << r.output;
  ASSERT_NE(b, std::string::npos) << r.output;
  ASSERT_LT(a, b) << r.output;
  const std::string under_a = r.output.substr(a, b - a), under_b = r.output.substr(b);
  for (const auto& [under, self, other] : {std::tuple{under_a, "refusing_a", "refusing_b"},
                                           std::tuple{under_b, "refusing_b", "refusing_a"}}) {
    EXPECT_TRUE(Has({0, under}, "FAIL CollectiveConformance.MatchSequentialComputation/" +
                                    std::string(self) + "_3ranks_large: "))
        << r.output;
    EXPECT_TRUE(Has({0, under}, std::string(self) + " refuses every connection")) << r.output;
    EXPECT_FALSE(Has({0, under}, other)) << under;
  }
}

TEST(PluginsCheckTest, BrokenContractsFailWithTheirReason) {
  CliRun r = Reel("plugins check " + kBroken + " --root leaky://check");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* failure :
       {"FAIL a write is invisible until Close: FAILED_PRECONDITION: before Close, Glob lists",
        "FAIL a writer destroyed without Close leaves nothing: FAILED_PRECONDITION:",
        "FAIL SaveState/RestoreState continue exactly; a foreign state is refused: "
        "INVALID_ARGUMENT: after SaveState, RestoreState into a fresh optimizer",
        "FAIL Restore(Position()) resumes exactly; a foreign position is InvalidArgument: "
        "INVALID_ARGUMENT: one batch, then Position and Restore in a new source: 11 videos",
        "reel plugins: FAILED_PRECONDITION: "})
    EXPECT_TRUE(Has(r, failure)) << failure << "\n" << r.output;
  // What these components do keep is reported as passing.
  EXPECT_TRUE(Has(r, "pass two shards read every video once between them")) << r.output;
  EXPECT_TRUE(Has(r, "pass steps descend a quadratic; Finish")) << r.output;
}

// The loader tests' "good" plugin: a model whose Backward writes nothing, a factory that throws,
// and a command that takes any word as a name.
TEST(PluginsCheckTest, ModelAndCommandFailuresNameTheReason) {
  CliRun r = Reel("plugins check " REEL_BINARY_DIR "/test-plugins/good/libreel_test_good.so");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Has(r,
                  "FAIL its input features are known: INVALID_ARGUMENT: the model reads "
                  "feature 'x' of unknown width; give it with --feature x=WIDTH"))
      << r.output;
  EXPECT_TRUE(Has(r,
                  "FAIL creates, declares its parameters and initialises: INTERNAL: model "
                  "'throwing_model': factory threw: boom"))
      << r.output;
  EXPECT_TRUE(Has(r,
                  "FAIL an unknown flag is a usage error (InvalidArgument): INTERNAL: "
                  "Run({\"--reel-check-unknown-flag\"}): expected INVALID_ARGUMENT, got OK"))
      << r.output;
  CliRun x = Reel("plugins check " REEL_BINARY_DIR
                  "/test-plugins/good/libreel_test_good.so --feature x=3");
  EXPECT_TRUE(Has(x,
                  "FAIL gradients match finite differences of the loss: INVALID_ARGUMENT: "
                  "along a random direction the loss changes at"))
      << x.output;
}

TEST(PluginsCheckTest, BadArgumentsAreOneClearLine) {
  struct Case {
    std::string args, error;
  } cases[] = {
      {"plugins check", "name one plugin file (FILE.so), or --builtins"},
      {"plugins check /nonexistent/x.so", "FAIL descriptor: loads: NOT_FOUND: /nonexistent/x.so"},
      {"plugins check " REEL_BINARY_DIR "/test-plugins/bad_1/libreel_test_bad_descriptor_1.so",
       "built for plugin ABI version 999, this host speaks version"},
      {"plugins check --builtins --feature rgb", "--feature rgb: expected NAME=WIDTH"},
      {"plugins check --builtins --feature rgb=0", "--feature rgb=0: expected NAME=WIDTH"},
      {"plugins check --builtins --option sync", "--option sync: expected COMPONENT.KEY=VALUE"},
      {"plugins check --builtins --classes 0", "--classes must be at least 1"},
      {"plugins check --builtins --frobnicate", "unknown flag '--frobnicate'"},
      {"plugins check --builtins --option sync.no_such=1",
       "FAIL creates and sets up on one rank: INVALID_ARGUMENT:"},
      {"plugins check --builtins --readme README.md",
       "--readme checks a plugin file's README, not the built-ins"},
      {"plugins check " REEL_BINARY_DIR
       "/test-plugins/good/libreel_test_good.so --readme /nonexistent/README.md",
       "FAIL README: readable: NOT_FOUND: /nonexistent/README.md"},
  };
  for (const Case& c : cases) {
    CliRun r = Reel(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_TRUE(Has(r, c.error)) << c.args << "\n" << r.output;
  }
}

}  // namespace

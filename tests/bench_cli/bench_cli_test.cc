// `reel bench KIND --name NAME` prints the kind's table for any registered component (built in
// here, or bundled when built), with min <= median <= max for each case, and writes the same
// report to --out. Sizes are tiny: these tests check the shape of the report, never a speed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/reel_cli.h"

namespace {

using reel::cli_testing::CliRun;
using reel::cli_testing::Reel;

bool Has(const CliRun& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

// The cells of the table rows (lines starting with "| " after the separator) whose first cell
// is `first`.
std::vector<std::string> Row(const std::string& output, const std::string& first) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| " + first + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream in(line.substr(1));
    for (std::string cell; std::getline(in, cell, '|');)
      cells.push_back(cell.substr(1, cell.size() >= 2 ? cell.size() - 2 : 0));
    return cells;
  }
  return {};
}

// Cells 1..3 are min, median and max seconds (or microseconds): ordered and positive.
void ExpectSpread(const std::vector<std::string>& row, const std::string& output) {
  ASSERT_GE(row.size(), 4u) << output;
  const double min = std::stod(row[1]), median = std::stod(row[2]), max = std::stod(row[3]);
  EXPECT_LE(min, median) << output;
  EXPECT_LE(median, max) << output;
  EXPECT_GE(min, 0.0) << output;
}

TEST(BenchCliTest, StorageTableForTheFileStorage) {
  CliRun r = Reel("bench storage --name file --bytes 65536 --reps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Has(r, "# storage benchmark: file (built in)")) << r.output;
  EXPECT_TRUE(Has(r, "| pass | min s | median s | max s | GB/s | its time / read whole |"));
  for (const char* pass : {"write (Append 8 MiB pieces, Close)", "read whole (one Read)",
                           "read 64 KiB pieces in order", "memcpy of the same bytes"})
    ExpectSpread(Row(r.output, pass), r.output);
  EXPECT_EQ(Row(r.output, "read whole (one Read)").back(), "1.00x") << r.output;
}

TEST(BenchCliTest, TransportTableForInproc) {
  CliRun r = Reel("bench transport --name inproc --max-bytes 65536 --reps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* bytes : {"4096", "16384", "65536"}) ExpectSpread(Row(r.output, bytes), r.output);
  EXPECT_TRUE(Row(r.output, "262144").empty()) << "past --max-bytes\n" << r.output;
  EXPECT_TRUE(Has(r, "| bytes | min us | median us | max us | algbw (GB/s) | busbw (GB/s) |"));
}

TEST(BenchCliTest, OptimizerTableForSyncOnOneAndTwoRanks) {
  CliRun r = Reel("bench optimizer --name sync --params 1000 --option rule=adam --reps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectSpread(Row(r.output, "1"), r.output);
  ExpectSpread(Row(r.output, "2"), r.output);
}

TEST(BenchCliTest, ModelAndSourceTablesForBundledPlugins) {
  if (!std::filesystem::exists(REEL_BINARY_DIR "/lib/reel/plugins/libreel_moe.so") ||
      !std::filesystem::exists(REEL_BINARY_DIR "/lib/reel/plugins/libreel_tfrecord.so"))
    GTEST_SKIP() << "the moe and tfrecord plugins are not built";
  CliRun model = Reel("bench model --name moe --batch 4 --classes 10 --reps 3");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  ExpectSpread(Row(model.output, "moe_step"), model.output);
  EXPECT_TRUE(Has(model, "B=4, T=300")) << model.output;

  const std::string dir = ::testing::TempDir() + "/bench_cli_source";
  std::filesystem::remove_all(dir);
  ASSERT_EQ(
      Reel("synth --out " + dir + " --videos 20 --classes 5 --level video --shards 1").exit_code,
      0);
  const std::string out = dir + "/report.md";
  CliRun source = Reel("bench source --name tfrecord --option 'files=" + dir +
                       "/*.tfrecord' --option level=video --reps 3 --out " + out);
  ASSERT_EQ(source.exit_code, 0) << source.output;
  ExpectSpread(Row(source.output, "tfrecord"), source.output);
  EXPECT_TRUE(Has(source, "One epoch of 20 videos")) << source.output;
  std::ifstream written(out);
  std::string report((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  EXPECT_EQ(report, source.output);  // --out holds exactly what was printed
  std::filesystem::remove_all(dir);
}

TEST(BenchCliTest, BadArgumentsAreOneClearLine) {
  struct Case {
    std::string args, error;
  } cases[] = {
      {"bench", "name one kind: storage, source, model, optimizer or transport"},
      {"bench disk --name file", "name one kind: storage, source, model, optimizer or transport"},
      {"bench storage", "--name NAME: which component to benchmark"},
      {"bench storage --name nfs", "no storage named 'nfs' (registered: file"},
      {"bench optimizer --name sync --reps 0", "--reps must be at least 1"},
      {"bench optimizer --name sync --option rule", "--option rule: expected KEY=VALUE"},
      {"bench optimizer --name sync --option rule=nesterov --params 10", "optimizer sync:"},
      {"bench storage --name file --bytes 0", "--bytes must be at least 1"},
      {"bench transport --name inproc --max-bytes 100", "--max-bytes must be at least 4096"},
      {"bench storage --name file --frobnicate 1", "unknown flag '--frobnicate'"},
  };
  for (const Case& c : cases) {
    CliRun r = Reel(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_TRUE(Has(r, c.error)) << c.args << "\n" << r.output;
  }
}

}  // namespace

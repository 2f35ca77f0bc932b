// Agreement with PyTorch: reel's BiLSTM encoder against torch.nn.LSTM(bidirectional=True) on
// packed sequences (tests/torch_reference.py, run as a subprocess), for given weights and a padded
// batch of different lengths: outputs, encodings and every weight gradient to 1e-4 relative.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "bilstm_encoder.h"
#include "reel/layers/testing.h"
#include "test_batches.h"

namespace reel::bilstm {
namespace {

namespace fs = std::filesystem;
using Arrays = std::map<std::string, std::vector<double>>;

// Interpreters to try: $REEL_PYTHON, python3 on PATH, /usr/bin/python3 (Debian's python3-torch
// installs for the system interpreter, which a PATH python such as pyenv's may shadow).
std::vector<std::string> PythonCandidates() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("REEL_PYTHON")) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  return candidates;
}

void WriteArray(std::ostream& out, const std::string& name, const auto& values) {
  out << name;
  for (auto v : values) out << ' ' << std::setprecision(9) << static_cast<double>(v);
  out << '\n';
}

Arrays ReadArrays(const fs::path& path) {
  Arrays arrays;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string name;
    s >> name;
    double v;
    while (s >> v) arrays[name].push_back(v);
  }
  return arrays;
}

// |got - want| <= 1e-4 * |want|, with a floor of 1e-4 * 1e-2 * max|want| so that entries that are
// nearly zero (cancellations) are compared at the block's scale.
void ExpectClose(const std::string& what, std::span<const float> got,
                 const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double tol = 1e-4 * std::max(std::abs(want[i]), 1e-2 * scale);
    if (std::abs(got[i] - want[i]) > tol) {
      ADD_FAILURE() << what << "[" << i << "]: reel " << got[i] << ", torch " << want[i];
      ++bad;
    }
  }
}

class TorchAgreementTest : public ::testing::TestWithParam<LstmImpl> {};

TEST_P(TorchAgreementTest, BidirectionalPackedLstmOutputsAndGradients) {
  const int64_t width = 5, hidden = 4, layers = 2, steps = 7;
  const std::vector<int32_t> lengths = {6, 2, 4};  // padded to 7; the longest is 6
  Batch batch;
  testing::AddIdsAndLabels(batch, {1, 2, 3}, 3);
  testing::AddFeature(batch, "rgb", width, steps, lengths, {1, 2, 3});
  const std::vector<float> r = layers::testing::RandomVector(3 * 2 * hidden, 17);

  const fs::path dir =
      fs::temp_directory_path() / ("reel_bilstm_torch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::map<std::string, std::vector<float>> enc, outputs, grads;
  std::ofstream in(dir / "in.txt");
  WriteArray(in, "input", std::vector<int64_t>{width});
  WriteArray(in, "hidden", std::vector<int64_t>{hidden});
  WriteArray(in, "layers", std::vector<int64_t>{layers});
  WriteArray(in, "steps", std::vector<int64_t>{steps});
  WriteArray(in, "lengths", lengths);
  WriteArray(in, "x", batch.features["rgb"].values.values());
  WriteArray(in, "r", r);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  bool weights_written = false;
  for (std::string pooling : {"last", "mean"}) {
    EncoderConfig config{"rgb", width, hidden, layers, *layers::ParsePooling(pooling), GetParam()};
    BiLstmEncoder encoder(config, "x", engine);
    ParamArena arena;
    ASSERT_TRUE(encoder.Declare(arena).ok());
    arena.Finalize();
    encoder.Initialize(23);
    if (!weights_written) {
      for (ParamArena::BlockId id = 0; id < static_cast<int>(arena.blocks().size()); ++id)
        WriteArray(in, arena.block(id).name.substr(2), arena.values(id));
      weights_written = true;
    }
    auto feature = encoder.FindFeature(batch);
    ASSERT_TRUE(feature.ok()) << feature.status();
    std::vector<float> e(3 * 2 * hidden);
    ASSERT_TRUE(encoder.Forward(**feature, true, e.data(), 2 * hidden, 0).ok());
    ASSERT_TRUE(encoder.Backward(r.data(), 2 * hidden, 0).ok());
    enc[pooling] = e;
    outputs[pooling] = encoder.TopOutputs();
    for (ParamArena::BlockId id = 0; id < static_cast<int>(arena.blocks().size()); ++id)
      grads[pooling + "/" + arena.block(id).name.substr(2)] =
          std::vector<float>(arena.grads(id).begin(), arena.grads(id).end());
  }
  in.close();
  // The script exits with 77 when its interpreter has no torch, the shell with 127 when there is
  // no such interpreter: then try the next one.
  int rc = 77;
  std::string cmd;
  for (const std::string& python : PythonCandidates()) {
    cmd = python + " " + REEL_BILSTM_TORCH_SCRIPT + " " + (dir / "in.txt").string() + " " +
          (dir / "out.txt").string() + " 2>" + (dir / "err.txt").string();
    const int status = std::system(cmd.c_str());
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (rc != 77 && rc != 127) break;
  }
  if (rc == 77 || rc == 127) {
    fs::remove_all(dir);
    GTEST_SKIP() << "no python3 with torch (tried $REEL_PYTHON, python3, /usr/bin/python3); "
                    "install Debian's python3-torch to run the PyTorch agreement test";
  }
  if (rc != 0) {
    std::ifstream err(dir / "err.txt");
    FAIL() << cmd << " exited with " << rc << ":\n"
           << std::string(std::istreambuf_iterator<char>(err), {});
  }
  Arrays want = ReadArrays(dir / "out.txt");
  fs::remove_all(dir);

  for (std::string pooling : {"last", "mean"}) {
    ExpectClose(pooling + "/enc", enc[pooling], want[pooling + "/enc"]);
    // reel's outputs stop at the longest length (6); torch's are padded to 7 frames.
    std::vector<double> torch_out;
    const std::vector<double>& full = want[pooling + "/outputs"];
    const int64_t trimmed = 6, w2 = 2 * hidden;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t t = 0; t < trimmed; ++t)
        for (int64_t j = 0; j < w2; ++j) torch_out.push_back(full[(b * steps + t) * w2 + j]);
    ExpectClose(pooling + "/outputs", outputs[pooling], torch_out);
  }
  ASSERT_EQ(grads.size(), 2u * layers * 2 * 3);
  for (const auto& [name, g] : grads) {
    ASSERT_TRUE(want.count(name)) << name;
    ExpectClose(name, g, want[name]);
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, TorchAgreementTest,
                         ::testing::Values(LstmImpl::kGemm, LstmImpl::kDnnlRnn),
                         [](const auto& info) {
                           return info.param == LstmImpl::kGemm ? "gemm" : "dnnl_rnn";
                         });

}  // namespace
}  // namespace reel::bilstm

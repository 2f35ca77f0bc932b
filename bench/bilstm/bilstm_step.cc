// One process, one measurement for run_bench.py: times reel's full BiLSTM training step (forward,
// loss, backward, Adam update) at a given shape, or dnnl_sgemm's 2048x2048 rate, and prints one
// JSON object on stdout.
//
//   reel_bilstm_step --shape video|audio --lengths 300,300,... [--steps 3] [--warmup 1]
//                    [--impl gemm|dnnl_rnn] [--precision fp32|bf16] [--min-seconds 0]
//                    [--sgemm-beside]
//   reel_bilstm_step --matmul --shape video|audio --lengths ... [--precision fp32|bf16]
//   reel_bilstm_step --sgemm [--steps 5] [--min-seconds 0]
//   reel_bilstm_step --stream [--steps 5]
//   reel_bilstm_step --short-gemm --width 256 [--steps 5]
//
// Timed steps: at least --steps, and more until they add up to --min-seconds. This VM's speed
// changes in stretches of a fraction of a second to seconds (the audio step in one quiet process:
// 62 ms for a run of steps, then 75-100 ms for the next, then 62 again), so a process that times
// two 60 ms steps samples a moment of it; a window of seconds averages over several stretches, as
// a training run does. "mean_s" (the window's time over its steps, what a training run pays) and
// "median_s" are both reported, with every step's time in "steps_s".
//
// Threads: oneDNN's OpenMP runtime, so OMP_NUM_THREADS sets them.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "bilstm_model.h"
#include "lstm_gates.h"
#include "reel/layers/bf16.h"
#include "reel/layers/gemm.h"
#include "reel/layers/init.h"
#include "reel/update_rule.h"

namespace {

using reel::bench::Clock;
using reel::bench::Median;
using reel::bench::Seconds;

// CPU time of the whole process (all threads): beside the wall time it shows how much of the two
// cores the step actually got on a shared machine (2x wall when it had both to itself).
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// "t1, t2, ..." for the json: every timed step, so a spread inside one process shows beside the
// spread between processes.
std::string JoinTimes(const std::vector<double>& times) {
  std::string out;
  char buf[32];
  for (double t : times) {
    std::snprintf(buf, sizeof(buf), "%s%.6f", out.empty() ? "" : ", ", t);
    out += buf;
  }
  return out;
}

// dnnl_sgemm's 2048^3 product on the OpenMP threads, timed once: the reference rate, also taken
// beside every step (--sgemm-beside) so a step and its reference see the same machine.
class SgemmProbe {
 public:
  SgemmProbe() : a_(kN * kN), b_(kN * kN), c_(kN * kN) {
    reel::layers::Rng rng(1);
    for (float& x : a_) x = rng.Symmetric(1);
    for (float& x : b_) x = rng.Symmetric(1);
  }
  // GFLOP/s of one product.
  double Run() {
    auto t0 = Clock::now();
    dnnl_sgemm('N', 'N', kN, kN, kN, 1.0f, a_.data(), kN, b_.data(), kN, 0.0f, c_.data(), kN);
    return 2.0 * kN * kN * kN / Seconds(t0, Clock::now()) / 1e9;
  }
  static constexpr int64_t kN = 2048;

 private:
  std::vector<float> a_, b_, c_;
};

// True while a timed window of `done` steps taking `seconds` needs another step.
bool WindowOpen(size_t done, double seconds, int steps, double min_seconds) {
  constexpr size_t kMaxSteps = 10000;
  return done < kMaxSteps && (done < static_cast<size_t>(steps) || seconds < min_seconds);
}

// The reference rate over the same kind of window as a step's: the window's products over its
// time ("gflops"), and the median product's rate.
int Sgemm(int steps, double min_seconds) {
  SgemmProbe probe;
  probe.Run();  // warm-up
  std::vector<double> rates;
  double seconds = 0;
  while (WindowOpen(rates.size(), seconds, steps, min_seconds)) {
    rates.push_back(probe.Run());
    seconds += 2.0 * std::pow(SgemmProbe::kN, 3) / rates.back() / 1e9;
  }
  const double flops = 2.0 * std::pow(SgemmProbe::kN, 3);
  std::printf(
      "{\"sgemm_n\": %ld, \"products\": %zu, \"mean_s\": %.6f, \"gflops\": %.3f, "
      "\"median_gflops\": %.3f}\n",
      static_cast<long>(SgemmProbe::kN), rates.size(), seconds / rates.size(),
      flops * rates.size() / seconds / 1e9, Median(rates));
  return 0;
}

// Per-class sigmoid cross-entropy, summed over classes, averaged over the batch: the core's loss
// (core/src/train/loss.cc, what `reel train` pays per step), copied so the benchmark needs no core
// build: one exp and one log1p per logit, the rows split over the OpenMP threads.
double Loss(const reel::Tensor& logits, const reel::Batch& batch, std::vector<float>& d) {
  const int64_t b_n = logits.dim(0), c_n = logits.dim(1);
  d.assign(static_cast<size_t>(b_n * c_n), 0.0f);
  std::vector<double> rows(static_cast<size_t>(b_n));
  const float inv_batch = 1.0f / static_cast<float>(b_n);
#pragma omp parallel for schedule(static) if (b_n * c_n >= (int64_t{1} << 16))
  for (int64_t b = 0; b < b_n; ++b) {
    std::vector<float> y(static_cast<size_t>(c_n), 0.0f);
    for (int32_t c : batch.labels(b)) y[static_cast<size_t>(c)] = 1.0f;
    double row = 0;
    for (int64_t c = 0; c < c_n; ++c) {
      const float x = logits.data()[b * c_n + c];
      const float e = std::exp(-std::fabs(x));
      row += static_cast<double>(std::max(x, 0.0f) - x * y[c] + std::log1p(e));
      const float sig = x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
      d[b * c_n + c] = (sig - y[c]) * inv_batch;
    }
    rows[static_cast<size_t>(b)] = row;
  }
  double loss = 0;
  for (double row : rows) loss += row;
  return loss / static_cast<double>(b_n);
}

// The memory bound of the phases that stream arrays once (the head's weights at batch 32, the
// update rule's state): a read-modify-write stream a += s*b over two 128 MiB arrays on the OpenMP
// threads, the access pattern of an update rule (every line written was read, so no extra read
// for ownership), counting two reads and one write per element.
int Stream(int steps) {
  const int64_t n = int64_t{32} << 20;
  std::vector<float> a(n), b(n, 1.0f);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = 0.0f;  // first touch by the thread that will use it
  std::vector<double> times;
  for (int i = 0; i < steps + 1; ++i) {
    auto t0 = Clock::now();
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) pa[j] += 0.5f * pb[j];
    if (i > 0) times.push_back(Seconds(t0, Clock::now()));
  }
  const double best = *std::min_element(times.begin(), times.end());
  std::printf("{\"stream_bytes\": %ld, \"threads\": %d, \"best_s\": %.6f, \"gbps\": %.3f}\n",
              static_cast<long>(3 * n * sizeof(float)), omp_get_max_threads(), best,
              3.0 * static_cast<double>(n) * sizeof(float) / best / 1e9);
  return 0;
}

// The MoE head's products alone at batch 32 (its two dense layers, 3862 x 3 and 3862 x 2 columns,
// `width` inputs): the forward y = x W, the weight gradient dW = x^T dy and the input gradient
// dx = dy W^T, each by dnnl_sgemm (Gemm) and by ShortGemm*, alternated; medians of `steps` after
// one warm-up.
int ShortGemmBench(int64_t width, int steps) {
  const int64_t batch = 32, classes = 3862;
  const int64_t cols[2] = {classes * 3, classes * 2};
  reel::layers::Rng rng(3);
  std::vector<float> x(batch * width), dy[2], w[2], y[2];
  for (float& v : x) v = rng.Symmetric(1);
  for (int l = 0; l < 2; ++l) {
    w[l].resize(width * cols[l]);
    dy[l].resize(batch * cols[l]);
    y[l].resize(batch * cols[l]);
    for (float& v : w[l]) v = rng.Symmetric(1);
    for (float& v : dy[l]) v = rng.Symmetric(1);
  }
  using reel::layers::Gemm;
  auto forward = [&](bool own) {
    for (int l = 0; l < 2; ++l) {
      if (own)
        reel::layers::ShortGemm(batch, cols[l], width, x.data(), width, w[l].data(), cols[l], false,
                                y[l].data(), cols[l]);
      else
        Gemm(false, false, batch, cols[l], width, 1.0f, x.data(), width, w[l].data(), cols[l], 0.0f,
             y[l].data(), cols[l]);
    }
  };
  std::vector<float> dw[2] = {std::vector<float>(w[0].size()), std::vector<float>(w[1].size())};
  auto grad = [&](bool own) {
    for (int l = 0; l < 2; ++l) {
      if (own)
        reel::layers::ShortGemmAtB(width, cols[l], batch, x.data(), width, dy[l].data(), cols[l],
                                   false, dw[l].data(), cols[l]);
      else
        Gemm(true, false, width, cols[l], batch, 1.0f, x.data(), width, dy[l].data(), cols[l], 0.0f,
             dw[l].data(), cols[l]);
    }
  };
  // dx = dy W^T: dnnl_sgemm as dx^T = W dy^T (the faster of its two routes at this shape, the
  // small transposition not counted) against ShortGemmABt.
  std::vector<float> dx(batch * width), dx_t(batch * width);
  auto input_grad = [&](bool own) {
    for (int l = 0; l < 2; ++l) {
      if (own)
        reel::layers::ShortGemmABt(batch, width, cols[l], dy[l].data(), cols[l], w[l].data(),
                                   cols[l], l == 1, dx.data(), width);
      else
        Gemm(false, true, width, batch, cols[l], 1.0f, w[l].data(), cols[l], dy[l].data(), cols[l],
             l == 1 ? 1.0f : 0.0f, dx_t.data(), batch);
    }
  };
  std::vector<double> t[6];
  for (int i = 0; i < steps + 1; ++i) {
    for (int v = 0; v < 6; ++v) {
      auto t0 = Clock::now();
      if (v < 2)
        forward(v == 1);
      else if (v < 4)
        grad(v == 3);
      else
        input_grad(v == 5);
      if (i > 0) t[v].push_back(Seconds(t0, Clock::now()));
    }
  }
  std::printf(
      "{\"width\": %ld, \"weight_bytes\": %ld, \"forward_sgemm_s\": %.6f, "
      "\"forward_short_s\": %.6f, \"dw_sgemm_s\": %.6f, \"dw_short_s\": %.6f, "
      "\"dx_sgemm_s\": %.6f, \"dx_short_s\": %.6f}\n",
      static_cast<long>(width), static_cast<long>(4 * width * (cols[0] + cols[1])), Median(t[0]),
      Median(t[1]), Median(t[2]), Median(t[3]), Median(t[4]), Median(t[5]));
  return 0;
}

// The step's largest product, the input projection of every frame [frames x D] x [D x 4H], as
// reel runs it in `precision` (layers::Gemm or layers::GemmBf16): the rate a step in that
// precision could reach at its shapes.
int Matmul(const std::string& shape, const std::vector<int32_t>& lengths, int steps,
           double min_seconds, bool bf16) {
  const bool video = shape == "video";
  const int64_t d = video ? 1024 : 128, g4 = 4 * (video ? 256 : 128);
  int64_t rows = 0;
  for (int32_t l : lengths) rows += l;
  std::vector<float> a(static_cast<size_t>(rows * d)), b(static_cast<size_t>(d * g4)),
      c(static_cast<size_t>(rows * g4));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  std::vector<reel::layers::bf16_t> a16(a.size()), b16(b.size());
  reel::layers::ToBf16(a.data(), static_cast<int64_t>(a.size()), a16.data());
  reel::layers::ToBf16(b.data(), static_cast<int64_t>(b.size()), b16.data());
  auto run = [&] {
    const Clock::time_point t0 = Clock::now();
    if (bf16)
      reel::layers::GemmBf16(false, false, rows, g4, d, a16.data(), d, b16.data(), g4, false,
                             c.data(), g4);
    else
      reel::layers::Gemm(false, false, rows, g4, d, 1.0f, a.data(), d, b.data(), g4, 0.0f, c.data(),
                         g4);
    return Seconds(t0, Clock::now());
  };
  run();  // warm-up (and the primitive's creation)
  std::vector<double> times;
  double seconds = 0;
  while (WindowOpen(times.size(), seconds, steps, min_seconds)) {
    times.push_back(run());
    seconds += times.back();
  }
  const double flops = 2.0 * static_cast<double>(rows * d * g4);
  std::printf(
      "{\"shape\": \"%s\", \"precision\": \"%s\", \"m\": %ld, \"n\": %ld, \"k\": %ld, "
      "\"products\": %zu, \"mean_s\": %.6f, \"gflops\": %.3f, \"median_gflops\": %.3f}\n",
      shape.c_str(), bf16 ? "bf16" : "fp32", static_cast<long>(rows), static_cast<long>(g4),
      static_cast<long>(d), times.size(), seconds / times.size(),
      flops * times.size() / seconds / 1e9, flops / Median(times) / 1e9);
  return 0;
}

int Step(const std::string& shape, const std::vector<int32_t>& lengths, int steps, int warmup,
         double min_seconds, const std::string& impl, bool bf16, bool sgemm_beside) {
  const bool video = shape == "video";
  const int64_t width = video ? 1024 : 128, hidden = video ? 256 : 128, steps_t = 300;
  const int64_t b_n = static_cast<int64_t>(lengths.size()), classes = 3862;
  const std::string kind = video ? "bilstm_video" : "bilstm_audio";
  auto options =
      reel::ParseOptions(reel::bilstm::BiLstmOptions(video ? "rgb" : "audio", width, hidden),
                         {{"hidden", std::to_string(hidden)}, {"head", "moe"}, {"impl", impl}});
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n", options.status().ToString().c_str());
    return 2;
  }
  reel::ModelContext context;
  context.num_classes = classes;
  context.precision = bf16 ? reel::Precision::kBf16 : reel::Precision::kFp32;
  auto model = reel::bilstm::BiLstmModel::Create(kind, *options, context);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  reel::ParamArena arena;
  if (!(*model)->DeclareParams(arena).ok()) return 1;
  arena.Finalize();
  if (!(*model)->Initialize(1).ok()) return 1;

  reel::Batch batch;
  reel::Feature f;
  f.values = reel::Tensor({b_n, steps_t, width});
  f.lengths = lengths;
  reel::layers::Rng rng(2);
  for (int64_t b = 0; b < b_n; ++b) {
    batch.ids.push_back("v" + std::to_string(b));
    for (int k = 0; k < 3; ++k)
      batch.label_ids.push_back(static_cast<int32_t>(rng.Next() % classes));
    batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
    for (int64_t j = 0; j < lengths[b] * width; ++j)
      f.values.data()[b * steps_t * width + j] = rng.Symmetric(2.0f);
  }
  batch.features[video ? "rgb" : "audio"] = std::move(f);

  auto adam = reel::MakeUpdateRule(reel::UpdateRuleConfig{});
  std::vector<double> total, cpu, fwd, bwd, upd, proj, rec, gates, head;
  std::vector<float> dlogits;
  double first_loss = 0, last_loss = 0;
  std::unique_ptr<SgemmProbe> probe;
  if (sgemm_beside) probe = std::make_unique<SgemmProbe>();
  std::vector<double> beside;  // sgemm GFLOP/s right before each timed step
  double timed_seconds = 0;
  for (int i = 0; i < warmup || WindowOpen(total.size(), timed_seconds, steps, min_seconds); ++i) {
    const double beside_rate = probe ? probe->Run() : 0;
    (*model)->ResetPhases();
    const double cpu0 = ProcessCpuSeconds();
    auto t0 = Clock::now();
    auto logits = (*model)->Forward(batch, reel::Mode::kTrain);
    if (!logits.ok()) {
      std::fprintf(stderr, "%s\n", logits.status().ToString().c_str());
      return 1;
    }
    const double loss = Loss(*logits, batch, dlogits);
    auto t1 = Clock::now();
    reel::Status s = (*model)->Backward(batch, reel::Tensor({b_n, classes}, dlogits));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    auto t2 = Clock::now();
    (*adam)->Apply(arena.values(), arena.grads(), 1e-3f);
    auto t3 = Clock::now();
    if (i == 0) first_loss = loss;
    last_loss = loss;
    if (i < warmup) continue;
    total.push_back(Seconds(t0, t3));
    timed_seconds += total.back();
    if (probe) beside.push_back(beside_rate);
    cpu.push_back(ProcessCpuSeconds() - cpu0);
    fwd.push_back(Seconds(t0, t1));
    bwd.push_back(Seconds(t1, t2));
    upd.push_back(Seconds(t2, t3));
    const auto phases = (*model)->phases();
    proj.push_back(phases.lstm.projections);
    rec.push_back(phases.lstm.recurrence);
    gates.push_back(phases.lstm.gates);
    head.push_back(phases.head);
  }
  int64_t frames = 0;
  for (int32_t l : lengths) frames += l;
  const auto cache = (*model)->cache_stats();
  std::printf(
      "{\"shape\": \"%s\", \"batch\": %ld, \"frames\": %ld, \"params\": %ld, \"median_s\": %.6f, "
      "\"mean_s\": %.6f, "
      "\"cpu_s\": %.6f, "
      "\"forward_loss_s\": %.6f, \"backward_s\": %.6f, \"adam_s\": %.6f, \"first_loss\": %.5f, "
      "\"last_loss\": %.5f, \"cache_hits\": %ld, \"cache_misses\": %ld, \"impl\": \"%s\", "
      "\"precision\": \"%s\", "
      "\"gates_isa\": \"%s\", \"phases_s\": {\"projections\": %.6f, \"recurrence\": %.6f, "
      "\"gates\": %.6f, \"head\": %.6f, \"update\": %.6f}, \"steps_s\": [%s], "
      "\"sgemm_beside_gflops\": [%s]}\n",
      shape.c_str(), static_cast<long>(b_n), static_cast<long>(frames),
      static_cast<long>(arena.total_size()), Median(total), timed_seconds / total.size(),
      Median(cpu), Median(fwd), Median(bwd), Median(upd), first_loss, last_loss,
      static_cast<long>(cache.hits), static_cast<long>(cache.misses), impl.c_str(),
      bf16 ? "bf16" : "fp32", reel::bilstm::LstmGatesIsa(), Median(proj), Median(rec),
      Median(gates), Median(head), Median(upd), JoinTimes(total).c_str(),
      JoinTimes(beside).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape = "video";
  std::vector<int32_t> lengths;
  int steps = 3, warmup = 1;
  double min_seconds = 0;
  bool sgemm = false, stream = false, short_gemm = false, sgemm_beside = false, matmul = false;
  std::string precision = "fp32";
  int64_t width = 256;
  std::string impl = "gemm";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--shape") {
      shape = next();
    } else if (a == "--lengths") {
      const std::string list = next();
      size_t pos = 0;
      while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        lengths.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a == "--steps") {
      steps = std::stoi(next());
    } else if (a == "--min-seconds") {
      min_seconds = std::stod(next());
    } else if (a == "--warmup") {
      warmup = std::stoi(next());
    } else if (a == "--impl") {
      impl = next();
    } else if (a == "--precision") {
      precision = next();
    } else if (a == "--matmul") {
      matmul = true;
    } else if (a == "--sgemm") {
      sgemm = true;
    } else if (a == "--sgemm-beside") {
      sgemm_beside = true;
    } else if (a == "--stream") {
      stream = true;
    } else if (a == "--short-gemm") {
      short_gemm = true;
    } else if (a == "--width") {
      width = std::stoi(next());
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (sgemm) return Sgemm(steps, min_seconds);
  if (stream) return Stream(steps);
  if (short_gemm) return ShortGemmBench(width, steps);
  if ((shape != "video" && shape != "audio") || lengths.empty()) {
    std::fprintf(stderr, "usage: reel_bilstm_step --shape video|audio --lengths L1,L2,...\n");
    return 2;
  }
  for (int32_t l : lengths)
    if (l < 1 || l > 300) {
      std::fprintf(stderr, "length %d outside 1..300\n", l);
      return 2;
    }
  if (precision != "fp32" && precision != "bf16") {
    std::fprintf(stderr, "--precision takes fp32 or bf16, not %s\n", precision.c_str());
    return 2;
  }
  if (matmul) return Matmul(shape, lengths, steps, min_seconds, precision == "bf16");
  return Step(shape, lengths, steps, warmup, min_seconds, impl, precision == "bf16", sgemm_beside);
}

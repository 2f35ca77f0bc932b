#include "bilstm_encoder.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>

#include "flush_denormals.h"
#include "reel/layers/init.h"
#include "reel/layers/input.h"

namespace reel::bilstm {
namespace {

// Copies n floats, or zeros them when src is null.
inline void CopyOrZero(float* dst, const float* src, int64_t n) {
  if (src)
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  else
    std::memset(dst, 0, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

// With 2 threads each direction runs single-threaded, on the two threads of one OpenMP team: the
// runtime keeps its pool thread spinning for a while after every parallel region (the head's, the
// update's), and a separate std::thread would have to share the second core with it (measured:
// a quarter of the audio step's CPU time in libgomp's spin). Nested in the team, oneDNN runs
// single-threaded. With more threads the directions get a std::thread and half the threads each.
Status RunBoth(const std::function<Status()>& a, const std::function<Status()>& b) {
  const int threads = omp_get_max_threads();
  if (threads < 2) {
    REEL_RETURN_IF_ERROR(a());
    return b();
  }
  if (threads == 2 && !omp_in_parallel()) {
    Status status[2];
#pragma omp parallel num_threads(2)
    {
      const int t = omp_get_thread_num();
      ScopedFlushDenormals flush;
      if (t == 0) status[0] = a();
      if (t == 1 || omp_get_num_threads() == 1) status[1] = b();  // one thread: in turn
    }
    REEL_RETURN_IF_ERROR(status[0]);
    return status[1];
  }
  Status sa;
  std::thread worker;
  try {
    worker = std::thread([&] {
      omp_set_num_threads(threads / 2);
      ScopedFlushDenormals flush;
      sa = a();
    });
  } catch (const std::system_error&) {  // no thread to be had: run them in turn
    REEL_RETURN_IF_ERROR(a());
    return b();
  }
  omp_set_num_threads(threads - threads / 2);
  Status sb;
  {
    ScopedFlushDenormals flush;
    sb = b();
  }
  worker.join();
  omp_set_num_threads(threads);
  REEL_RETURN_IF_ERROR(sa);
  return sb;
}

Result<LstmImpl> ParseLstmImpl(const std::string& name) {
  if (name == "gemm") return LstmImpl::kGemm;
  if (name == "dnnl_rnn") return LstmImpl::kDnnlRnn;
  return InvalidArgumentError("option 'impl': '" + name + "' is not gemm or dnnl_rnn");
}

BiLstmEncoder::BiLstmEncoder(EncoderConfig config, std::string prefix, const dnnl::engine& engine)
    : config_(std::move(config)), prefix_(std::move(prefix)), engine_(engine) {}

Status BiLstmEncoder::Declare(ParamArena& arena) {
  arena_ = &arena;
  layers_.clear();
  layers_.resize(static_cast<size_t>(config_.layers));
  const int64_t h = config_.hidden;
  for (int64_t k = 0; k < config_.layers; ++k) {
    const int64_t in = k == 0 ? config_.width : 2 * h;
    for (auto [dir, name] : {std::pair{&layers_[static_cast<size_t>(k)].fwd, "fwd"},
                             std::pair{&layers_[static_cast<size_t>(k)].bwd, "bwd"}}) {
      const std::string p = prefix_ + "/l" + std::to_string(k) + "/" + name;
      REEL_ASSIGN_OR_RETURN(dir->wx, arena.Declare(p + "/wx", {in, 4, h}));
      REEL_ASSIGN_OR_RETURN(dir->wh, arena.Declare(p + "/wh", {h, 4, h}));
      REEL_ASSIGN_OR_RETURN(dir->b, arena.Declare(p + "/b", {4, h}));
      if (config_.impl == LstmImpl::kGemm)
        dir->gemm = std::make_unique<GemmLstm>(in, h, dir == &layers_[static_cast<size_t>(k)].bwd,
                                               config_.bf16);
      else
        dir->lstm = std::make_unique<DnnlLstm>(engine_, in, h);
    }
  }
  return Status::Ok();
}

void BiLstmEncoder::Initialize(uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(config_.hidden));
  for (Layer& layer : layers_)
    for (Dir* d : {&layer.fwd, &layer.bwd})
      for (ParamArena::BlockId id : {d->wx, d->wh, d->b})
        layers::FillUniform(arena_->values(id), bound, seed, arena_->block(id).name);
}

Result<const Feature*> BiLstmEncoder::FindFeature(const Batch& batch) const {
  return layers::CheckedFeature(batch, config_.feature, config_.width);
}

Status BiLstmEncoder::RunForward(Dir& d, bool train) {
  d.out.resize(static_cast<size_t>(steps_ * batch_ * config_.hidden));
  return d.lstm->Forward(train, steps_, batch_, d.in.data(), arena_->values(d.wx).data(),
                         arena_->values(d.wh).data(), arena_->values(d.b).data(), d.out.data());
}

Status BiLstmEncoder::RunBackward(Dir& d, const std::vector<float>& dout, std::vector<float>& din) {
  din.resize(static_cast<size_t>(steps_ * batch_ * d.lstm->input()));
  return d.lstm->Backward(steps_, batch_, d.in.data(), d.out.data(), arena_->values(d.wx).data(),
                          arena_->values(d.wh).data(), arena_->values(d.b).data(), dout.data(),
                          din.data(), arena_->grads(d.wx).data(), arena_->grads(d.wh).data(),
                          arena_->grads(d.b).data());
}

// Layer k's inputs from layer k-1's outputs: at original time t < len, [fwd(t), bwd(len-1-t)]
// (the backward direction's output for frame t); the reversed copy swaps which side is reversed.
void BiLstmEncoder::BuildLayerInputs(size_t k) {
  const Layer& prev = layers_[k - 1];
  Layer& cur = layers_[k];
  const int64_t h = config_.hidden, in = 2 * h;
  cur.fwd.in.resize(static_cast<size_t>(steps_ * batch_ * in));
  cur.bwd.in.resize(cur.fwd.in.size());
  for (int64_t t = 0; t < steps_; ++t)
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t len = lengths_[static_cast<size_t>(b)];
      float* f = cur.fwd.in.data() + (t * batch_ + b) * in;
      float* r = cur.bwd.in.data() + (t * batch_ + b) * in;
      const bool valid = t < len;
      const int64_t s = len - 1 - t;  // the mirrored frame
      auto at = [&](const std::vector<float>& v, int64_t time) {
        return valid ? v.data() + (time * batch_ + b) * h : nullptr;
      };
      CopyOrZero(f, at(prev.fwd.out, t), h);
      CopyOrZero(f + h, at(prev.bwd.out, s), h);
      CopyOrZero(r, at(prev.fwd.out, s), h);
      CopyOrZero(r + h, at(prev.bwd.out, t), h);
    }
}

Status BiLstmEncoder::Forward(const Feature& feature, bool train, float* enc, int64_t enc_ld,
                              int64_t col) {
  trained_ = false;
  batch_ = feature.values.dim(0);
  const int64_t h = config_.hidden;
  ScopedFlushDenormals flush;  // also for the threads RunBoth() starts, which inherit it
  lengths_ = feature.lengths;
  steps_ = *std::max_element(lengths_.begin(), lengths_.end());
  if (config_.impl == LstmImpl::kGemm) {
    REEL_RETURN_IF_ERROR(ForwardGemm(feature));
  } else {
    REEL_RETURN_IF_ERROR(ForwardDnnl(feature, train));
  }
  const Layer& top = layers_.back();
  argmax_fwd_.resize(static_cast<size_t>(batch_ * h));
  argmax_bwd_.resize(argmax_fwd_.size());
  // Each direction pools into its own columns, on its own thread.
  auto pool = [&](bool backward_dir) {
    if (config_.impl == LstmImpl::kGemm) {
      PoolGemm(enc, enc_ld, col, backward_dir);
    } else {
      layers::PoolForward(config_.pooling, (backward_dir ? top.bwd : top.fwd).out.data(), steps_,
                          batch_, h, lengths_, enc, enc_ld, col + (backward_dir ? h : 0),
                          (backward_dir ? argmax_bwd_ : argmax_fwd_).data());
    }
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(RunBoth([&] { return pool(false); }, [&] { return pool(true); }));
  trained_ = train;
  return Status::Ok();
}

Status BiLstmEncoder::ForwardDnnl(const Feature& feature, bool train) {
  const int64_t t_in = feature.values.dim(1), width = config_.width;
  Layer& first = layers_.front();
  first.fwd.in.resize(static_cast<size_t>(steps_ * batch_ * width));
  first.bwd.in.resize(first.fwd.in.size());
  layers::BtdToTbd(feature.values.data(), batch_, t_in, width, lengths_, steps_, false,
                   first.fwd.in.data());
  layers::BtdToTbd(feature.values.data(), batch_, t_in, width, lengths_, steps_, true,
                   first.bwd.in.data());
  for (size_t k = 0; k < layers_.size(); ++k) {
    if (k > 0) BuildLayerInputs(k);
    Layer& layer = layers_[k];
    REEL_RETURN_IF_ERROR(RunBoth([&] { return RunForward(layer.fwd, train); },
                                 [&] { return RunForward(layer.bwd, train); }));
  }
  return Status::Ok();
}

Status BiLstmEncoder::Backward(const float* denc, int64_t enc_ld, int64_t col) {
  if (!trained_)
    return FailedPreconditionError("encoder of feature '" + config_.feature +
                                   "': Backward() without a training Forward()");
  const int64_t h = config_.hidden, n = steps_ * batch_ * h;
  ScopedFlushDenormals flush;
  if (config_.impl == LstmImpl::kGemm) return BackwardGemm(denc, enc_ld, col);
  dout_fwd_.resize(static_cast<size_t>(n));
  dout_bwd_.resize(static_cast<size_t>(n));
  REEL_RETURN_IF_ERROR(RunBoth(
      [&] {
        layers::PoolBackward(config_.pooling, denc, enc_ld, col, steps_, batch_, h, lengths_,
                             argmax_fwd_.data(), dout_fwd_.data());
        return Status::Ok();
      },
      [&] {
        layers::PoolBackward(config_.pooling, denc, enc_ld, col + h, steps_, batch_, h, lengths_,
                             argmax_bwd_.data(), dout_bwd_.data());
        return Status::Ok();
      }));
  return BackwardDnnl();
}

Status BiLstmEncoder::BackwardDnnl() {
  const int64_t h = config_.hidden;
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& layer = layers_[k];
    REEL_RETURN_IF_ERROR(RunBoth([&] { return RunBackward(layer.fwd, dout_fwd_, din_fwd_); },
                                 [&] { return RunBackward(layer.bwd, dout_bwd_, din_bwd_); }));
    ReportBlocks(sink_, *arena_, layer.fwd.wx, layer.bwd.b);  // declared in this order
    if (k == 0) break;
    // Route the input gradients of layer k back to layer k-1's outputs, undoing the reversal of
    // BuildLayerInputs(): din_* are [T, B, 2H] in each direction's own time order.
    const int64_t in = 2 * h;
    for (int64_t t = 0; t < steps_; ++t)
      for (int64_t b = 0; b < batch_; ++b) {
        const int64_t len = lengths_[static_cast<size_t>(b)];
        float* df = dout_fwd_.data() + (t * batch_ + b) * h;
        float* dr = dout_bwd_.data() + (t * batch_ + b) * h;
        if (t >= len) {
          std::fill_n(df, h, 0.0f);
          std::fill_n(dr, h, 0.0f);
          continue;
        }
        const int64_t s = len - 1 - t;
        const float* f_t = din_fwd_.data() + (t * batch_ + b) * in;
        const float* f_s = din_fwd_.data() + (s * batch_ + b) * in;
        const float* r_t = din_bwd_.data() + (t * batch_ + b) * in;
        const float* r_s = din_bwd_.data() + (s * batch_ + b) * in;
        for (int64_t j = 0; j < h; ++j) {
          df[j] = f_t[j] + r_s[j];
          dr[j] = f_s[h + j] + r_t[h + j];
        }
      }
  }
  return Status::Ok();
}

std::vector<float> BiLstmEncoder::TopOutputs() const {
  const int64_t h = config_.hidden;
  const Layer& top = layers_.back();
  std::vector<float> out(static_cast<size_t>(batch_ * steps_ * 2 * h), 0.0f);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t len = lengths_[static_cast<size_t>(b)];
    for (int64_t t = 0; t < len; ++t) {
      float* o = out.data() + (b * steps_ + t) * 2 * h;
      if (config_.impl == LstmImpl::kGemm) {  // a packed row holds both directions' frame t
        std::memcpy(o, top.packed_out.data() + layout_.Row(t, b) * 2 * h,
                    static_cast<size_t>(2 * h) * sizeof(float));
        continue;
      }
      std::memcpy(o, top.fwd.out.data() + (t * batch_ + b) * h,
                  static_cast<size_t>(h) * sizeof(float));
      std::memcpy(o + h, top.bwd.out.data() + ((len - 1 - t) * batch_ + b) * h,
                  static_cast<size_t>(h) * sizeof(float));
    }
  }
  return out;
}

DnnlLstm::CacheStats BiLstmEncoder::cache_stats() const {
  DnnlLstm::CacheStats total;
  for (const Layer& layer : layers_)
    for (const Dir* d : {&layer.fwd, &layer.bwd}) {
      if (!d->lstm) continue;
      total.hits += d->lstm->stats().hits;
      total.misses += d->lstm->stats().misses;
    }
  return total;
}

}  // namespace reel::bilstm

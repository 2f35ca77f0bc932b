// Test doubles for the trainer, evaluator and checkpoint tests: an in-memory Storage, a tiny
// linear Model, a synthetic DataSource with a planted signal, and a plain SGD Optimizer. They
// follow the SDK contracts closely enough that the trainer cannot tell them from real plugins.
// Not part of libreel (header only, included by *_test.cc).
#ifndef REEL_CORE_SRC_TRAIN_TESTING_H_
#define REEL_CORE_SRC_TRAIN_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "reel/data_source.h"
#include "reel/glob.h"
#include "reel/model.h"
#include "reel/optimizer.h"
#include "reel/storage.h"

namespace reel::core::testing {

// Objects in a map; writes become visible at Close(), like the real storages.
class MemStorage : public Storage, public StorageResolver {
 public:
  Result<Storage*> ForUri(std::string_view) override { return static_cast<Storage*>(this); }

  Result<std::vector<ObjectInfo>> Glob(std::string_view pattern) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ObjectInfo> out;
    for (const auto& [k, v] : objects_)
      if (GlobMatch(pattern, k)) out.push_back({k, v.size()});
    return out;
  }
  Result<std::unique_ptr<RandomAccessFile>> OpenRead(std::string_view uri) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(std::string(uri));
    if (it == objects_.end()) return NotFoundError(std::string(uri) + ": no such object");
    return std::unique_ptr<RandomAccessFile>(new Reader(it->first, it->second));
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(std::string_view uri) override {
    return std::unique_ptr<WritableFile>(new Writer(this, std::string(uri)));
  }
  Status Delete(std::string_view uri) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!objects_.erase(std::string(uri))) return NotFoundError(std::string(uri));
    return Status::Ok();
  }

  std::map<std::string, std::string> objects() {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_;
  }
  void Put(const std::string& uri, std::string bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[uri] = std::move(bytes);
  }

 private:
  class Reader : public RandomAccessFile {
   public:
    Reader(std::string uri, std::string data) : uri_(std::move(uri)), data_(std::move(data)) {}
    const std::string& uri() const override { return uri_; }
    Result<uint64_t> Size() override { return data_.size(); }
    Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
      if (offset >= data_.size()) return size_t{0};
      size_t n = std::min<size_t>(out.size(), data_.size() - offset);
      std::memcpy(out.data(), data_.data() + offset, n);
      return n;
    }

   private:
    std::string uri_, data_;
  };
  class Writer : public WritableFile {
   public:
    Writer(MemStorage* s, std::string uri) : s_(s), uri_(std::move(uri)) {}
    Status Append(std::span<const std::byte> d) override {
      buf_.append(reinterpret_cast<const char*>(d.data()), d.size());
      return Status::Ok();
    }
    Status Close() override {
      s_->Put(uri_, buf_);
      return Status::Ok();
    }

   private:
    MemStorage* s_;
    std::string uri_, buf_;
  };
  std::mutex mu_;
  std::map<std::string, std::string> objects_;
};

// Videos with one feature "x" [1, D]; class c is a label when x[c % D] * sign > 0.4, so a linear
// model can learn it. Shuffled per epoch from (seed, epoch); sharded by index % world_size.
class TinySource : public DataSource {
 public:
  TinySource(int videos, int dim, int classes, int batch, uint64_t seed, ShardSpec shard,
             bool shuffle = true)
      : dim_(dim), batch_(batch), seed_(seed), shuffle_(shuffle) {
    std::mt19937 rng(1234);  // the dataset itself does not depend on the run's seed
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int v = 0; v < videos; ++v) {
      Video vid;
      vid.id = "v" + std::to_string(v);
      for (int d = 0; d < dim; ++d) vid.x.push_back(n(rng));  // every video, so shards agree
      if (v % shard.world_size != shard.rank) continue;
      for (int c = 0; c < classes; ++c)
        if ((c / dim % 2 ? -1.0f : 1.0f) * vid.x[c % dim] > 0.4f) vid.labels.push_back(c);
      videos_.push_back(std::move(vid));
    }
    StartEpoch(0).ok();
  }

  Result<Batch> Next() override {
    if (pos_ >= order_.size()) return OutOfRangeError("end of epoch");
    Batch b;
    size_t n = std::min<size_t>(static_cast<size_t>(batch_), order_.size() - pos_);
    Feature f{Tensor({static_cast<int64_t>(n), 1, dim_}), std::vector<int32_t>(n, 1)};
    for (size_t i = 0; i < n; ++i) {
      const Video& v = videos_[order_[pos_ + i]];
      b.ids.push_back(v.id);
      std::copy(v.x.begin(), v.x.end(), f.values.data() + i * dim_);
      b.label_ids.insert(b.label_ids.end(), v.labels.begin(), v.labels.end());
      b.label_offsets.push_back(static_cast<int64_t>(b.label_ids.size()));
    }
    b.features["x"] = std::move(f);
    pos_ += n;
    return b;
  }
  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    pos_ = 0;
    order_.resize(videos_.size());
    std::iota(order_.begin(), order_.end(), size_t{0});
    if (shuffle_) {
      std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(epoch));
      std::shuffle(order_.begin(), order_.end(), rng);
    }
    return Status::Ok();
  }
  Result<std::string> Position() const override {
    return "tiny:" + std::to_string(epoch_) + ":" + std::to_string(pos_);
  }
  Status Restore(std::string_view p) override {
    if (p.substr(0, 5) != "tiny:") return InvalidArgumentError("foreign position");
    std::string s(p.substr(5));
    size_t colon = s.find(':');
    REEL_RETURN_IF_ERROR(StartEpoch(std::stoll(s.substr(0, colon))));
    pos_ = std::stoull(s.substr(colon + 1));
    return Status::Ok();
  }

 private:
  struct Video {
    std::string id;
    std::vector<float> x;
    std::vector<int32_t> labels;
  };
  int64_t dim_;
  int batch_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<Video> videos_;
  std::vector<size_t> order_;
  size_t pos_ = 0;
  int64_t epoch_ = 0;
};

// logits = x W + b, on the feature "x" [B, 1, D].
class TinyModel : public Model {
 public:
  TinyModel(int dim, int classes, std::string feature = "x")
      : dim_(dim), classes_(classes), feature_(std::move(feature)) {}
  std::vector<std::string> InputFeatures() const override { return {feature_}; }
  Status DeclareParams(ParamArena& arena) override {
    arena_ = &arena;
    REEL_ASSIGN_OR_RETURN(w_, arena.Declare("w", {dim_, classes_}));
    REEL_ASSIGN_OR_RETURN(b_, arena.Declare("b", {classes_}));
    return Status::Ok();
  }
  Status Initialize(uint64_t seed) override {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> n(0.0f, 0.1f);
    for (float& v : arena_->values(w_)) v = n(rng);
    for (float& v : arena_->values(b_)) v = 0.0f;
    return Status::Ok();
  }
  Result<Tensor> Forward(const Batch& batch, Mode) override {
    REEL_ASSIGN_OR_RETURN(const Feature* f, batch.Find(feature_));
    if (f->values.dim(2) != dim_) return InvalidArgumentError("feature width");
    const int64_t n = batch.size();
    Tensor out({n, classes_});
    auto w = arena_->values(w_);
    auto b = arena_->values(b_);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < classes_; ++c) {
        float s = b[c];
        for (int64_t d = 0; d < dim_; ++d)
          s += f->values.data()[i * dim_ + d] * w[d * classes_ + c];
        out.data()[i * classes_ + c] = s;
      }
    return out;
  }
  Status Backward(const Batch& batch, const Tensor& dlogits) override {
    REEL_ASSIGN_OR_RETURN(const Feature* f, batch.Find(feature_));
    auto gw = arena_->grads(w_);
    auto gb = arena_->grads(b_);
    std::fill(gw.begin(), gw.end(), 0.0f);
    std::fill(gb.begin(), gb.end(), 0.0f);
    // The bias first and reported at once, as a model reports its last layer first.
    for (int64_t i = 0; i < batch.size(); ++i)
      for (int64_t c = 0; c < classes_; ++c) gb[c] += dlogits.data()[i * classes_ + c];
    ReportBlocks(sink_, *arena_, b_, b_);
    for (int64_t i = 0; i < batch.size(); ++i)
      for (int64_t c = 0; c < classes_; ++c) {
        float g = dlogits.data()[i * classes_ + c];
        for (int64_t d = 0; d < dim_; ++d)
          gw[d * classes_ + c] += f->values.data()[i * dim_ + d] * g;
      }
    ReportBlocks(sink_, *arena_, w_, w_);
    return Status::Ok();
  }
  void SetGradientSink(GradientSink* sink) override { sink_ = sink; }

 private:
  int64_t dim_, classes_;
  std::string feature_;
  ParamArena* arena_ = nullptr;
  ParamArena::BlockId w_ = 0, b_ = 0;
  GradientSink* sink_ = nullptr;
};

// Momentum SGD; averages gradients over ranks with AllReduce when there are several. Written as a
// third party's synchronous optimizer: the four methods reel/optimizer.h requires, nothing else.
class TinySgd : public Optimizer {
 public:
  Status Setup(ParamArena& arena, Communicator& comm) override {
    arena_ = &arena;
    comm_ = &comm;
    velocity_.assign(static_cast<size_t>(arena.total_size()), 0.0f);
    return Status::Ok();
  }
  Status Step(float lr) override {
    auto g = arena_->grads();
    if (comm_->size() > 1) {
      REEL_RETURN_IF_ERROR(comm_->AllReduce(g, ReduceOp::kSum, NoDeadline()));
      for (float& x : g) x /= static_cast<float>(comm_->size());
    }
    auto p = arena_->values();
    for (size_t i = 0; i < p.size(); ++i) {
      velocity_[i] = 0.9f * velocity_[i] + g[i];
      p[i] -= lr * velocity_[i];
    }
    ++steps_;
    return Status::Ok();
  }
  Result<std::string> SaveState() override {
    std::string s(reinterpret_cast<const char*>(velocity_.data()),
                  velocity_.size() * sizeof(float));
    return "sgd:" + std::to_string(steps_) + ":" + s;
  }
  Status RestoreState(std::string_view state) override {
    if (state.substr(0, 4) != "sgd:") return InvalidArgumentError("foreign optimizer state");
    state.remove_prefix(4);
    size_t colon = state.find(':');
    steps_ = std::stoll(std::string(state.substr(0, colon)));
    state.remove_prefix(colon + 1);
    if (state.size() != velocity_.size() * sizeof(float))
      return DataLossError("optimizer state size");
    std::memcpy(velocity_.data(), state.data(), state.size());
    return Status::Ok();
  }
  int64_t steps() const { return steps_; }

 private:
  ParamArena* arena_ = nullptr;
  Communicator* comm_ = nullptr;
  std::vector<float> velocity_;
  int64_t steps_ = 0;
};

// A rate the trainer printed (train/progress.h): a live line redrawn on a terminal, or a printed
// line (a log line, or on a terminal at verbosity 2 a log note).
struct RateLine {
  int64_t step = 0;
  double job = 0.0;     // the whole job's ex/s
  double worker = 0.0;  // "(this worker ...)"
  bool live = false;
};
// Every progress line of `out` that shows both rates.
inline std::vector<RateLine> RateLines(const std::string& out) {
  static const std::regex kRates(
      R"(step (\d+)(?:/\d+)?  ([0-9.]+) ex/s \(this worker ([0-9.]+)\))");
  std::vector<RateLine> lines;
  // A live line is drawn after "\r\033[K" and ends unterminated (the next redraw clears it).
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find_first_of("\r\n", at);
    const bool live = end == std::string::npos || out[end] == '\r';
    std::string piece = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (piece.rfind("\033[K", 0) == 0) piece.erase(0, 3);
    std::smatch m;
    if (std::regex_search(piece, m, kRates))
      lines.push_back({std::stoll(m[1]), std::stod(m[2]), std::stod(m[3]), live});
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return lines;
}

}  // namespace reel::core::testing

#endif  // REEL_CORE_SRC_TRAIN_TESTING_H_

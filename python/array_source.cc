#include "array_source.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>

#include "reel/plugin.h"

namespace reel::python {
namespace {

std::mutex g_tables_mu;
std::map<int64_t, std::shared_ptr<const ArrayTable>> g_tables;  // guarded by g_tables_mu
int64_t g_next = 1;                                             // guarded by g_tables_mu

class ArraySource : public DataSource {
 public:
  ArraySource(std::shared_ptr<const ArrayTable> t, int64_t handle, int64_t batch, bool shuffle,
              uint64_t seed, ShardSpec shard)
      : t_(std::move(t)),
        handle_(handle),
        batch_(batch),
        shuffle_(shuffle),
        seed_(seed),
        shard_(shard) {
    Order();
  }

  Result<Batch> Next() override {
    if (next_ >= static_cast<int64_t>(order_.size())) return OutOfRangeError("end of epoch");
    const int64_t n = std::min<int64_t>(batch_, static_cast<int64_t>(order_.size()) - next_);
    Batch b;
    Feature f;
    f.values = Tensor::Uninitialized({n, 1, t_->width});
    f.lengths.assign(static_cast<size_t>(n), 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = order_[static_cast<size_t>(next_ + i)];
      b.ids.push_back("r" + std::to_string(row));
      std::copy_n(t_->x.data() + row * t_->width, t_->width, f.values.data() + i * t_->width);
      for (int64_t k = t_->label_offsets[row]; k < t_->label_offsets[row + 1]; ++k)
        b.label_ids.push_back(t_->label_ids[static_cast<size_t>(k)]);
      b.label_offsets.push_back(static_cast<int64_t>(b.label_ids.size()));
    }
    b.features.emplace("x", std::move(f));
    next_ += n;
    return b;
  }

  Status StartEpoch(int64_t epoch) override {
    epoch_ = epoch;
    next_ = 0;
    Order();
    return Status::Ok();
  }

  Result<std::string> Position() const override {
    return "numpy/v1 table=" + std::to_string(handle_) + " epoch=" + std::to_string(epoch_) +
           " next=" + std::to_string(next_);
  }

  Status Restore(std::string_view position) override {
    std::istringstream in{std::string(position)};
    std::string tag;
    int64_t table = 0, epoch = 0, next = 0;
    char c;
    if (!(in >> tag) || tag != "numpy/v1" || !(in.ignore(7) >> table) || !(in.ignore(7) >> epoch) ||
        !(in.ignore(6) >> next) || table != handle_ || (in >> c))
      return InvalidArgumentError("not a position of this numpy table: '" + std::string(position) +
                                  "'");
    REEL_RETURN_IF_ERROR(StartEpoch(epoch));
    next_ = std::min<int64_t>(next, static_cast<int64_t>(order_.size()));
    return Status::Ok();
  }

 private:
  void Order() {
    order_.clear();
    for (int64_t r = 0; r < t_->rows; ++r)
      if (r % shard_.world_size == shard_.rank) order_.push_back(r);
    if (shuffle_) {
      std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(epoch_));
      std::shuffle(order_.begin(), order_.end(), rng);
    }
  }

  std::shared_ptr<const ArrayTable> t_;
  int64_t handle_, batch_;
  bool shuffle_;
  uint64_t seed_;
  ShardSpec shard_;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, next_ = 0;
};

Status Register(Registrar& r) noexcept {
  return r.Add<DataSource>(
      {"numpy",
       "video-level arrays in this Python process (reel.sklearn)",
       {IntOption("table", 0, "handle of the arrays"),
        IntOption("batch_size", 32, "videos a batch"),
        BoolOption("shuffle", true, "permute every epoch from the seed"),
        IntOption("num_classes", 3862, "labels lie in [0, num_classes)")}},
      [](const Options& o, const DataSourceContext& ctx) -> Result<std::unique_ptr<DataSource>> {
        const int64_t handle = o.GetInt("table");
        std::shared_ptr<const ArrayTable> t;
        {
          std::lock_guard<std::mutex> lock(g_tables_mu);
          auto it = g_tables.find(handle);
          if (it != g_tables.end()) t = it->second;
        }
        if (!t) return NotFoundError("no numpy table " + std::to_string(handle));
        if (o.GetInt("batch_size") < 1) return InvalidArgumentError("batch_size must be >= 1");
        return std::unique_ptr<DataSource>(new ArraySource(
            t, handle, o.GetInt("batch_size"), o.GetBool("shuffle"), ctx.seed, ctx.shard));
      });
}

}  // namespace

int64_t AddArrayTable(ArrayTable table) {
  std::lock_guard<std::mutex> lock(g_tables_mu);
  g_tables[g_next] = std::make_shared<const ArrayTable>(std::move(table));
  return g_next++;
}

void DropArrayTable(int64_t handle) {
  std::lock_guard<std::mutex> lock(g_tables_mu);
  g_tables.erase(handle);
}

Status RegisterArraySource(core::Registry& registry) {
  return registry.RegisterFrom("python", "", nullptr, &Register);
}

}  // namespace reel::python

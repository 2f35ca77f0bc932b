// A plugin whose components each break one promise of their contract, so the tests can show that
// `reel plugins check` catches it and says why: a storage whose writes show before Close, an
// optimizer that forgets its momentum across SaveState/RestoreState, and a data source whose
// Restore ignores the position.
#include <map>
#include <memory>

#include "reel/plugin.h"

namespace {

// Memory storage ("leaky://"): Append writes straight into the visible object.
class LeakyStorage final : public reel::Storage {
 public:
  class File final : public reel::RandomAccessFile, public reel::WritableFile {
   public:
    File(std::string uri, std::string* bytes) : uri_(std::move(uri)), bytes_(bytes) {}
    const std::string& uri() const override { return uri_; }
    reel::Result<uint64_t> Size() override { return bytes_->size(); }
    reel::Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
      if (offset >= bytes_->size()) return size_t{0};
      size_t n = std::min(out.size(), bytes_->size() - offset);
      std::memcpy(out.data(), bytes_->data() + offset, n);
      return n;
    }
    reel::Status Append(std::span<const std::byte> data) override {
      bytes_->append(reinterpret_cast<const char*>(data.data()), data.size());
      return reel::Status::Ok();
    }
    reel::Status Close() override { return reel::Status::Ok(); }

   private:
    std::string uri_;
    std::string* bytes_;
  };
  reel::Result<std::vector<reel::ObjectInfo>> Glob(std::string_view pattern) override {
    std::vector<reel::ObjectInfo> out;
    const std::string prefix(pattern.substr(0, pattern.find_first_of("*?[")));
    for (auto& [uri, bytes] : objects_)
      if (uri.rfind(prefix, 0) == 0 && uri.find('/', prefix.size()) == std::string::npos)
        out.push_back({uri, bytes.size()});
    return out;
  }
  reel::Result<std::unique_ptr<reel::RandomAccessFile>> OpenRead(std::string_view uri) override {
    auto it = objects_.find(std::string(uri));
    if (it == objects_.end()) return reel::NotFoundError(std::string(uri) + ": no such object");
    return std::unique_ptr<reel::RandomAccessFile>(new File(it->first, &it->second));
  }
  reel::Result<std::unique_ptr<reel::WritableFile>> OpenWrite(std::string_view uri) override {
    std::string& bytes = objects_[std::string(uri)];
    bytes.clear();
    return std::unique_ptr<reel::WritableFile>(new File(std::string(uri), &bytes));
  }
  reel::Status Delete(std::string_view uri) override {
    if (objects_.erase(std::string(uri)) == 0) return reel::NotFoundError(std::string(uri));
    return reel::Status::Ok();
  }

 private:
  std::map<std::string, std::string> objects_;
};

// SGD with momentum whose SaveState leaves the momentum out.
class ForgetfulOptimizer final : public reel::Optimizer {
 public:
  reel::Status Setup(reel::ParamArena& arena, reel::Communicator&) override {
    arena_ = &arena;
    velocity_.assign(arena.values().size(), 0.0f);
    return reel::Status::Ok();
  }
  reel::Status Step(float lr) override {
    auto w = arena_->values();
    auto g = arena_->grads();
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * (velocity_[i] = 0.9f * velocity_[i] + g[i]);
    return reel::Status::Ok();
  }
  reel::Result<std::string> SaveState() override { return std::string("v1"); }
  reel::Status RestoreState(std::string_view state) override {
    return state == "v1" ? reel::Status::Ok() : reel::InvalidArgumentError("not a state");
  }

 private:
  reel::ParamArena* arena_ = nullptr;
  std::vector<float> velocity_;
};

// Ten one-video batches; Restore accepts any position and starts over.
class RestlessSource final : public reel::DataSource {
 public:
  explicit RestlessSource(reel::ShardSpec shard) : shard_(shard) {}
  reel::Result<reel::Batch> Next() override {
    while (next_ < 10 && next_ % shard_.world_size != shard_.rank) ++next_;
    if (next_ >= 10) return reel::OutOfRangeError("end of epoch");
    reel::Batch b;
    b.ids = {"v" + std::to_string(next_++)};
    b.label_offsets = {0, 0};
    return b;
  }
  reel::Status StartEpoch(int64_t) override {
    next_ = 0;
    return reel::Status::Ok();
  }
  reel::Result<std::string> Position() const override { return std::to_string(next_); }
  reel::Status Restore(std::string_view) override { return reel::Status::Ok(); }

 private:
  reel::ShardSpec shard_;
  int next_ = 0;
};

reel::Status Register(reel::Registrar& r) {
  REEL_RETURN_IF_ERROR(r.Add<reel::Storage>(
      {"leaky", "writes show before Close", {}},
      [](const reel::Options&) -> reel::Result<std::unique_ptr<reel::Storage>> {
        return std::unique_ptr<reel::Storage>(new LeakyStorage());
      }));
  REEL_RETURN_IF_ERROR(r.Add<reel::Optimizer>(
      {"forgetful", "momentum lost across SaveState/RestoreState", {}},
      [](const reel::Options&,
         const reel::OptimizerContext&) -> reel::Result<std::unique_ptr<reel::Optimizer>> {
        return std::unique_ptr<reel::Optimizer>(new ForgetfulOptimizer());
      }));
  return r.Add<reel::DataSource>(
      {"restless", "Restore ignores the position", {}},
      [](const reel::Options&,
         const reel::DataSourceContext& ctx) -> reel::Result<std::unique_ptr<reel::DataSource>> {
        return std::unique_ptr<reel::DataSource>(new RestlessSource(ctx.shard));
      });
}

}  // namespace

REEL_PLUGIN("broken", "1.0.0", "Components that each break one contract", Register)

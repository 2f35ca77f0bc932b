// A well-formed test plugin: a model, a command and a storage, built the way plugin authors do.
#include <memory>

#include "reel/plugin.h"

namespace {

// Sums each video's first feature frame into every logit; enough to check calls cross the boundary.
class EchoModel final : public reel::Model {
 public:
  EchoModel(int64_t scale, int64_t classes) : scale_(scale), classes_(classes) {}
  std::vector<std::string> InputFeatures() const override { return {"x"}; }
  reel::Status DeclareParams(reel::ParamArena& arena) override {
    arena_ = &arena;
    REEL_ASSIGN_OR_RETURN(w_, arena.Declare("w", {1}));
    return reel::Status::Ok();
  }
  reel::Status Initialize(uint64_t) override {
    arena_->values(w_)[0] = static_cast<float>(scale_);
    return reel::Status::Ok();
  }
  reel::Result<reel::Tensor> Forward(const reel::Batch& batch, reel::Mode) override {
    REEL_ASSIGN_OR_RETURN(const reel::Feature* x, batch.Find("x"));
    reel::Tensor logits({batch.size(), classes_});
    for (int64_t b = 0; b < batch.size(); ++b)
      for (int64_t c = 0; c < classes_; ++c)
        logits.data()[b * classes_ + c] =
            arena_->values(w_)[0] * x->values.data()[b * x->values.dim(1) * x->values.dim(2)];
    return logits;
  }
  reel::Status Backward(const reel::Batch&, const reel::Tensor&) override {
    return reel::Status::Ok();
  }

 private:
  int64_t scale_, classes_;
  reel::ParamArena* arena_ = nullptr;
  reel::ParamArena::BlockId w_ = 0;
};

// "greeting://" URIs: one object, named by the option `name`; shows which storage options a
// process was given (`reel hello --from-storage`). Nothing can be read or written.
class GreetingStorage final : public reel::Storage {
 public:
  explicit GreetingStorage(std::string name) : name_(std::move(name)) {}
  reel::Result<std::vector<reel::ObjectInfo>> Glob(std::string_view) override {
    return std::vector<reel::ObjectInfo>{{"greeting://" + name_, 0}};
  }
  reel::Result<std::unique_ptr<reel::RandomAccessFile>> OpenRead(std::string_view uri) override {
    return reel::UnimplementedError(std::string(uri) + ": greeting storage is not readable");
  }
  reel::Result<std::unique_ptr<reel::WritableFile>> OpenWrite(std::string_view uri) override {
    return reel::UnimplementedError(std::string(uri) + ": greeting storage is not writable");
  }
  reel::Status Delete(std::string_view uri) override {
    return reel::UnimplementedError(std::string(uri) + ": greeting storage deletes nothing");
  }

 private:
  std::string name_;
};

class HelloCommand final : public reel::Command {
 public:
  std::string Usage() const override {
    return "reel hello [NAME | --from-storage | --as-if-interrupted]";
  }
  reel::Status Run(const std::vector<std::string>& args, reel::CommandContext& ctx) override {
    // What a plugin command that stops on Ctrl-C returns.
    if (args.size() == 1 && args[0] == "--as-if-interrupted")
      return reel::CancelledError("stopped before greeting");
    if (args.size() > 1) return reel::InvalidArgumentError("hello takes at most one name");
    std::string name = args.empty() ? "world" : args[0];
    if (name == "--from-storage") {  // the name the greeting storage was given
      REEL_ASSIGN_OR_RETURN(reel::Storage * storage, ctx.storage->ForUri("greeting://"));
      REEL_ASSIGN_OR_RETURN(auto objects, storage->Glob("greeting://*"));
      name = objects.at(0).uri.substr(std::string("greeting://").size());
    }
    *ctx.out << "hello " << name << "\n";
    return reel::Status::Ok();
  }
};

reel::Status Register(reel::Registrar& r) {
  REEL_RETURN_IF_ERROR(r.Add<reel::Model>(
      {"echo_model", "test model", {reel::IntOption("scale", 2, "multiplier")}},
      [](const reel::Options& o,
         const reel::ModelContext& ctx) -> reel::Result<std::unique_ptr<reel::Model>> {
        if (o.GetInt("scale") < 0) return reel::InvalidArgumentError("option 'scale' must be >= 0");
        return std::unique_ptr<reel::Model>(new EchoModel(o.GetInt("scale"), ctx.num_classes));
      }));
  REEL_RETURN_IF_ERROR(r.Add<reel::Model>(
      {"throwing_model", "its factory throws", {}},
      [](const reel::Options&, const reel::ModelContext&)
          -> reel::Result<std::unique_ptr<reel::Model>> { throw std::runtime_error("boom"); }));
  REEL_RETURN_IF_ERROR(r.Add<reel::Storage>(
      {"greeting",
       "one object named by its option",
       {reel::StringOption("name", "world", "the one object's name")}},
      [](const reel::Options& o) -> reel::Result<std::unique_ptr<reel::Storage>> {
        return std::unique_ptr<reel::Storage>(new GreetingStorage(o.GetString("name")));
      }));
  return r.Add<reel::Command>({"hello", "prints a greeting", {}},
                              []() -> reel::Result<std::unique_ptr<reel::Command>> {
                                return std::unique_ptr<reel::Command>(new HelloCommand());
                              });
}

}  // namespace

// Not exported: plugins are built with hidden visibility, so only the entry symbol is seen.
int reel_test_internal_function() { return 42; }

REEL_PLUGIN("good", "1.2.3", "A well-formed plugin for the loader tests", Register)

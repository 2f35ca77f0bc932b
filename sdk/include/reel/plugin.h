// Writing a plugin: one shared library, one exported entry point, one or more components.
//
//   #include "reel/plugin.h"
//   static reel::Status Register(reel::Registrar& r) {
//     return r.Add<reel::Model>({"my_model", "what it is", MyModelOptions()},
//                                [](const reel::Options& o, const reel::ModelContext& c)
//                                    -> reel::Result<std::unique_ptr<reel::Model>> { ... });
//   }
//   REEL_PLUGIN("my_plugin", "1.0.0", "One line about the plugin", Register)
//
// REEL_PLUGIN exports one C-linkage symbol, `reel_plugin_entry`, through Boost.DLL's alias
// mechanism; it returns a PluginDescriptor. The host reads abi_version first and checks the SDK
// version and build tag before it calls anything else, so a plugin built for another ABI, SDK or
// C++ runtime is refused with a one-line reason instead of crashing. Build plugins with hidden
// visibility (-fvisibility=hidden): only the entry symbol needs to be seen.
//
// No exception may cross the boundary: REEL_PLUGIN wraps the registration function, and
// Registrar::Add wraps each factory, in handlers that turn exceptions into Internal errors.
// Component methods (Forward, Read, ...) must not throw.
#ifndef REEL_PLUGIN_H_
#define REEL_PLUGIN_H_

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "reel/command.h"
#include "reel/data_source.h"
#include "reel/model.h"
#include "reel/optimizer.h"
#include "reel/options.h"
#include "reel/status.h"
#include "reel/storage.h"
#include "reel/transport.h"
#include "reel/version.h"

namespace reel {

// The six kinds of component a plugin may register.
enum class ComponentKind { kStorage, kDataSource, kModel, kOptimizer, kTransport, kCommand };

// The kind as `reel plugins` prints it: "storage", "data", "model", ...
inline const char* ComponentKindName(ComponentKind k) {
  switch (k) {
    case ComponentKind::kStorage:
      return "storage";
    case ComponentKind::kDataSource:
      return "data";
    case ComponentKind::kModel:
      return "model";
    case ComponentKind::kOptimizer:
      return "optimizer";
    case ComponentKind::kTransport:
      return "transport";
    case ComponentKind::kCommand:
      return "command";
  }
  return "?";
}

// Factories, one signature per kind. A storage is named after the URI scheme it serves.
using StorageFactory = std::function<Result<std::unique_ptr<Storage>>(const Options&)>;
using DataSourceFactory =
    std::function<Result<std::unique_ptr<DataSource>>(const Options&, const DataSourceContext&)>;
using ModelFactory =
    std::function<Result<std::unique_ptr<Model>>(const Options&, const ModelContext&)>;
using OptimizerFactory =
    std::function<Result<std::unique_ptr<Optimizer>>(const Options&, const OptimizerContext&)>;
using TransportFactory = std::function<Result<std::unique_ptr<Transport>>(const Options&)>;
using CommandFactory = std::function<Result<std::unique_ptr<Command>>()>;
// The variant's index order matches ComponentKind.
using AnyFactory = std::variant<StorageFactory, DataSourceFactory, ModelFactory, OptimizerFactory,
                                TransportFactory, CommandFactory>;

// What a component says about itself when registered: `reel plugins show` prints it, and
// configs are checked against its option schema.
struct ComponentInfo {
  std::string name;         // unique per kind across every loaded plugin, e.g. "bilstm_video"
  std::string description;  // one line
  OptionSchema options;
};

// The factory type of component kind T: Registrar::Add<T> takes one.
template <typename T>
struct FactoryFor;
template <>
struct FactoryFor<Storage> {
  using type = StorageFactory;
};
template <>
struct FactoryFor<DataSource> {
  using type = DataSourceFactory;
};
template <>
struct FactoryFor<Model> {
  using type = ModelFactory;
};
template <>
struct FactoryFor<Optimizer> {
  using type = OptimizerFactory;
};
template <>
struct FactoryFor<Transport> {
  using type = TransportFactory;
};
template <>
struct FactoryFor<Command> {
  using type = CommandFactory;
};

// The host's side of registration. Thread-safety: called from the loading thread only.
class BOOST_SYMBOL_VISIBLE Registrar {
 public:
  virtual ~Registrar() = default;

  // Registers a component of kind T. Errors: AlreadyExists when the name is taken (naming both
  // providers), InvalidArgument for an empty name.
  template <typename T, typename F>
  Status Add(ComponentInfo info, F factory) {
    return AddComponent(std::move(info),
                        AnyFactory(Guard(typename FactoryFor<T>::type(std::move(factory)))));
  }

 protected:
  virtual Status AddComponent(ComponentInfo info, AnyFactory factory) = 0;

 private:
  // Wraps a factory so an exception thrown inside the plugin becomes an Internal error there.
  template <typename R, typename... A>
  static std::function<R(A...)> Guard(std::function<R(A...)> f) {
    return [f = std::move(f)](A... args) -> R {
      try {
        return f(args...);
      } catch (const std::exception& e) {
        return InternalError(std::string("factory threw: ") + e.what());
      } catch (...) {
        return InternalError("factory threw a non-standard exception");
      }
    };
  }
};

// The current plugin ABI: bumped whenever a contract in sdk/include/reel changes incompatibly.
// 2: Tensor storage became a shared_ptr with a release function (TensorPool).
// 3: ModelContext gained `threads` (a compute-thread budget per model); the transport tag space
//    became [0, kMaxTag = 32767].
// 4: Optimizer gained AcceptGradientClipping() and last_gradient_norm() (clipping after the
//    allreduce).
// 5: Communicator::Split; Optimizer gained EndEpoch, Serve, HasServerOnlyRanks, ScheduleStep,
//    Refresh and CollectState, and its factory an OptimizerContext (rank and world size).
// 6: Optimizer gained OfferCheckpoints (the run's checkpoint directory, for state that ranks
//    other than the lead save themselves) and TrainsIndependently (training ranks that step on
//    their own without server-only ranks).
// 7: Optimizer gained NoteStep and AppliedWorkOf (a lost rank's share counted from what the
//    parameter holders applied); UpdateRule gained BeginUpdate and ApplyPart (one update applied
//    in pieces, as a parameter server applies a push while its chunks arrive).
// 8: Optimizer gained LeadAfter (who takes over a lost lead of independent training ranks).
// 9: Optimizer gained ExamplesApplied (the whole job's examples/s of independent training ranks,
//    from what the parameter holders applied).
// 10: Optimizer keeps what every optimizer needs; the calls for optimizers that give ranks roles
//     (IsServerOnly to LeadAfter, OfferCheckpoints, ScheduleStep, Refresh, NoteStep) moved to
//     RankRoles (reel/rank_roles.h, Optimizer::rank_roles); CollectState merged into SaveState,
//     which is no longer const.
// 11: ModelContext gained `precision` (trainer.precision, resolved by the host); UpdateRule's
//     rules override Update (which also sums the gradient's squares) instead of ApplyPart.
// 12: Communicator gained ReduceScatter and AllGatherShards (over reel/shard_layout.h) and
//     CommunicatorCapabilities `native_reduce_scatter`; Optimizer gained GatherState() and
//     gradient_sink(), Model SetGradientSink (reel/model.h's GradientSink: gradient ranges as
//     Backward() finishes them, so "sync" reduces them during backward); Communicator gained
//     SetComputeAlongside (a hint that compute runs beside the collectives that follow).
inline constexpr uint32_t kPluginAbiVersion = 12;

// The plugin's registration function, as REEL_PLUGIN wraps it (never throws).
using RegisterFn = Status (*)(Registrar&) noexcept;

// Returned by the entry point. abi_version is the first member on purpose: the host reads it
// before trusting the layout of anything else.
struct PluginDescriptor {
  uint32_t abi_version;
  const char* sdk_version;  // REEL_SDK_VERSION the plugin was built with, "MAJOR.MINOR.PATCH"
  const char* build_tag;    // REEL_BUILD_TAG: compiler and C++ runtime ABI
  const char* name;
  const char* version;
  const char* description;
  RegisterFn register_components;
};

// The type of the exported entry point.
using PluginEntryFn = const PluginDescriptor* (*)() noexcept;

// The exported symbol's name.
inline constexpr const char* kPluginEntrySymbol = "reel_plugin_entry";

}  // namespace reel

// Defines the plugin's entry point (see the file comment): once per plugin, at global scope of one
// of its source files.
#define REEL_PLUGIN(NAME, VERSION, DESCRIPTION, REGISTER_FN)                                     \
  namespace {                                                                                    \
  ::reel::Status reel_plugin_register_(::reel::Registrar& r) noexcept {                          \
    try {                                                                                        \
      return REGISTER_FN(r);                                                                     \
    } catch (const std::exception& e) {                                                          \
      return ::reel::InternalError(std::string("plugin registration threw: ") + e.what());       \
    } catch (...) {                                                                              \
      return ::reel::InternalError("plugin registration threw a non-standard exception");        \
    }                                                                                            \
  }                                                                                              \
  const ::reel::PluginDescriptor* reel_plugin_descriptor_() noexcept {                           \
    static const ::reel::PluginDescriptor descriptor{                                            \
        ::reel::kPluginAbiVersion, REEL_SDK_VERSION, REEL_BUILD_TAG, NAME, VERSION, DESCRIPTION, \
        &reel_plugin_register_};                                                                 \
    return &descriptor;                                                                          \
  }                                                                                              \
  }                                                                                              \
  BOOST_DLL_ALIAS(reel_plugin_descriptor_, reel_plugin_entry)

#endif  // REEL_PLUGIN_H_

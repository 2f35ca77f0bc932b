// Conformance checks for components of every kind: what `reel plugins check FILE.so` runs over each
// component a plugin registers, so a plugin author's CI learns which contract it breaks, and why.
//
// Each check exercises one promise of the kind's contract in reel/*.h (a storage's Close makes an
// object visible at once, a data source's Restore resumes where Position was taken, a model's
// Backward matches finite differences of the core's loss, an optimizer's state survives
// Save/Restore, ...) and reports a name and a Status: OK, or an error saying what was seen. A
// check that cannot run without something the caller did not give (a storage root on a remote
// scheme, the options a data source requires) is skipped with the reason. Transports are checked
// by the transport conformance suite (reel/testing/transport_conformance.h), not here.
//
// Thread-safety: one check at a time; the checks start their own threads where a contract
// involves several ranks.
#ifndef REEL_CORE_CONFORMANCE_H_
#define REEL_CORE_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "reel/core/plugin_loader.h"
#include "reel/core/registry.h"
#include "reel/status.h"
#include "reel/storage.h"

namespace reel::core {

// One check's result, as `reel plugins check` prints it (pass, FAIL or skip with the reason).
struct CheckOutcome {
  std::string name;      // what was checked, e.g. "a write is invisible until Close"
  Status status;         // OK, or what went wrong
  bool skipped = false;  // status then says why
};

// Receives every outcome as soon as its check ends, so a caller prints progress as it goes.
using CheckSink = std::function<void(const CheckOutcome&)>;

// What the checks of one component need from the caller; the defaults suit most components.
struct ConformanceOptions {
  // Options of the component under test, as a config would give them.
  std::map<std::string, std::string> options;
  // Storage: where objects may be written and deleted, e.g. "s3://bucket/reel-check". Empty: a
  // fresh temporary directory for the "file" scheme; other schemes are skipped.
  std::string storage_root;
  // Model: the width of each input feature and whether it is frame-level; features the model
  // names that are not here take their YouTube-8M widths (rgb/mean_rgb 1024, audio/mean_audio
  // 128; "mean_*" video-level, others frame-level). "name" -> {width, frames (1: video level)}.
  std::map<std::string, std::pair<int64_t, int64_t>> features;
  int64_t num_classes = 5;  // the width of a model's logits in its checks
};

// The plugin's descriptor and registration: version "MAJOR.MINOR.PATCH", a description, at least
// one component, and for each a description and an option schema whose names are unique and
// whose defaults parse as their types.
void CheckPluginDescriptor(const LoadedPlugin& plugin, const Registry& registry,
                           const CheckSink& sink);

// The plugin's README (`readme`, markdown; `readme_name` names it in the error) documents exactly
// the options its components declare: the backquoted names in the first column of its option
// tables (tables whose header row starts with "| option") against the schemas' names. A plugin
// whose components take no options has no such table.
void CheckReadmeOptions(const LoadedPlugin& plugin, const Registry& registry,
                        std::string_view readme, const std::string& readme_name,
                        const CheckSink& sink);

// The checks of `entry`'s kind (storage, data source, model, optimizer, command); `storage`
// resolves the URIs a data source reads. Transports: see the header comment.
void CheckComponent(const Registry& registry, const ComponentEntry& entry,
                    const ConformanceOptions& options, StorageResolver& storage,
                    const CheckSink& sink);

// A batch of `videos` synthetic videos for `model`: each feature it names, at the width given in
// options.features (else YouTube-8M's, see above), `frames` frames long for frame-level ones
// (lengths vary a little between videos) with normal random values, and one random label each in
// [0, options.num_classes). InvalidArgument naming a feature of unknown width.
Result<Batch> SyntheticBatch(const Model& model, const ConformanceOptions& options, int64_t videos,
                             int64_t frames);

}  // namespace reel::core

#endif  // REEL_CORE_CONFORMANCE_H_

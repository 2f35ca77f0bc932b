// Checkpoint encoding, layout checks and the directory manager (see reel/core/checkpoint.h).
#include "reel/core/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "checkpoint.pb.h"
#include "reel/recordio.h"

namespace reel::core {
namespace {

constexpr uint32_t kFormatVersion = 1;
constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".reelckpt";

std::string JoinUri(std::string_view dir, std::string_view name) {
  std::string out(dir);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (!out.empty()) out += '/';
  return out + std::string(name);
}

// The step of a checkpoint object's URI, or -1 if the name is not ours.
int64_t StepOf(std::string_view uri) {
  size_t slash = uri.rfind('/');
  std::string_view name = slash == std::string_view::npos ? uri : uri.substr(slash + 1);
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return -1;
  std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  int64_t step = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return -1;
    step = step * 10 + (ch - '0');
  }
  return step;
}

// The element count of a shape read from a file, or -1 for a negative dimension or a count past
// int64 (NumElements would overflow: undefined behaviour, then any answer).
int64_t ElementsOf(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

void CheckpointState::CaptureParams(const ParamArena& arena) {
  params.clear();
  for (size_t i = 0; i < arena.blocks().size(); ++i) {
    const auto& b = arena.blocks()[i];
    auto v = arena.values(static_cast<ParamArena::BlockId>(i));
    params.push_back({b.name, b.shape, std::vector<float>(v.begin(), v.end())});
  }
}

Status RestoreParams(const CheckpointState& state, std::string_view model_name, ParamArena& arena,
                     std::string_view where) {
  const std::string w(where);
  if (state.model_name != model_name)
    return FailedPreconditionError(w + ": checkpoint holds model '" + state.model_name +
                                   "', not '" + std::string(model_name) + "'");
  const auto& blocks = arena.blocks();
  if (state.params.size() != blocks.size())
    return FailedPreconditionError(w + ": checkpoint has " + std::to_string(state.params.size()) +
                                   " parameter blocks, the model has " +
                                   std::to_string(blocks.size()) + " (different model options?)");
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& have = state.params[i];
    if (have.name != blocks[i].name || have.shape != blocks[i].shape ||
        static_cast<int64_t>(have.values.size()) != blocks[i].size)
      return FailedPreconditionError(
          w + ": parameter block " + std::to_string(i) + " is '" + have.name + "' " +
          ShapeToString(have.shape) + " in the checkpoint but '" + blocks[i].name + "' " +
          ShapeToString(blocks[i].shape) + " in the model (different model options?)");
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto dst = arena.values(static_cast<ParamArena::BlockId>(i));
    std::copy(state.params[i].values.begin(), state.params[i].values.end(), dst.begin());
  }
  return Status::Ok();
}

std::string EncodeCheckpoint(const CheckpointState& s) {
  reel::checkpoint::CheckpointPayload p;
  p.set_model_name(s.model_name);
  for (const auto& b : s.params) {
    auto* pb = p.add_params();
    pb->set_name(b.name);
    for (int64_t d : b.shape) pb->add_shape(d);
    pb->set_values(std::string(reinterpret_cast<const char*>(b.values.data()),
                               b.values.size() * sizeof(float)));
  }
  p.set_optimizer_state(s.optimizer_state);
  p.set_step(s.step);
  p.set_epoch(s.epoch);
  p.set_schedule_step(s.schedule_step);
  for (const auto& pos : s.data_positions) p.add_data_positions(pos);
  for (int64_t e : s.data_epochs) p.add_data_epochs(e);
  for (int64_t e : s.data_steps) p.add_data_steps(e);
  p.set_config_text(s.config_text);
  p.set_seed(s.seed);
  p.set_examples_seen(s.examples_seen);
  p.set_world_size(s.world_size);
  p.set_wall_time(s.wall_time);
  p.set_train_seconds(s.train_seconds);
  p.set_start_world_size(s.start_world_size);
  reel::checkpoint::CheckpointFile f;
  f.set_format_version(kFormatVersion);
  f.set_payload(p.SerializeAsString());
  f.set_payload_crc32c(recordio::Crc32c(f.payload()));
  return f.SerializeAsString();
}

Result<CheckpointState> DecodeCheckpoint(std::string_view bytes, std::string_view where) {
  const std::string w(where);
  reel::checkpoint::CheckpointFile f;
  if (!f.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return DataLossError(w + ": not a reel checkpoint (unparsable envelope, " +
                         std::to_string(bytes.size()) + " bytes)");
  if (f.format_version() != kFormatVersion)
    return DataLossError(w + ": checkpoint format version " + std::to_string(f.format_version()) +
                         " (this reel reads version " + std::to_string(kFormatVersion) + ")");
  const uint32_t crc = recordio::Crc32c(f.payload());
  if (crc != f.payload_crc32c())
    return DataLossError(w + ": checkpoint checksum mismatch (CRC32C of " +
                         std::to_string(f.payload().size()) + " payload bytes is " +
                         std::to_string(crc) + ", stored " + std::to_string(f.payload_crc32c()) +
                         "): the file is corrupt");
  reel::checkpoint::CheckpointPayload p;
  if (!p.ParseFromString(f.payload()))
    return DataLossError(w + ": checkpoint payload does not parse");
  CheckpointState s;
  s.model_name = p.model_name();
  for (const auto& pb : p.params()) {
    CheckpointState::Block b;
    b.name = pb.name();
    b.shape.assign(pb.shape().begin(), pb.shape().end());
    if (pb.values().size() % sizeof(float) != 0 ||
        static_cast<int64_t>(pb.values().size() / sizeof(float)) != ElementsOf(b.shape))
      return DataLossError(w + ": parameter '" + b.name + "' has " +
                           std::to_string(pb.values().size()) + " bytes for shape " +
                           ShapeToString(b.shape));
    b.values.resize(pb.values().size() / sizeof(float));
    // A block with a zero dimension has no values, and memcpy must not see its null data().
    if (!b.values.empty()) std::memcpy(b.values.data(), pb.values().data(), pb.values().size());
    s.params.push_back(std::move(b));
  }
  s.optimizer_state = p.optimizer_state();
  s.step = p.step();
  s.epoch = p.epoch();
  s.schedule_step = p.schedule_step();
  s.data_positions.assign(p.data_positions().begin(), p.data_positions().end());
  s.data_epochs.assign(p.data_epochs().begin(), p.data_epochs().end());
  s.data_steps.assign(p.data_steps().begin(), p.data_steps().end());
  s.config_text = p.config_text();
  s.seed = p.seed();
  s.examples_seen = p.examples_seen();
  s.world_size = p.world_size();
  s.wall_time = p.wall_time();
  s.train_seconds = p.train_seconds();
  s.start_world_size = p.start_world_size();
  return s;
}

std::string CheckpointName(int64_t step) {
  std::string digits = std::to_string(step);
  if (digits.size() < 10) digits.insert(0, 10 - digits.size(), '0');
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

CheckpointManager::CheckpointManager(StorageResolver& storage, std::string dir, int keep)
    : storage_(storage), dir_(std::move(dir)), keep_(keep) {}

Result<std::string> CheckpointManager::Save(const CheckpointState& state) {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  REEL_RETURN_IF_ERROR(storage->CreateDir(dir_));
  const std::string uri = JoinUri(dir_, CheckpointName(state.step));
  Status s = WriteAll(*storage, uri, EncodeCheckpoint(state));
  if (!s.ok()) return s.WithContext("writing checkpoint " + uri);
  if (keep_ > 0) {
    REEL_ASSIGN_OR_RETURN(auto all, List());
    for (size_t i = 0; i + static_cast<size_t>(keep_) < all.size(); ++i) {
      Status d = storage->Delete(all[i].second);
      if (!d.ok() && d.code() != StatusCode::kNotFound)
        return d.WithContext("pruning old checkpoint " + all[i].second);
    }
  }
  return uri;
}

Result<std::vector<std::pair<int64_t, std::string>>> CheckpointManager::List() {
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  auto objects = storage->Glob(JoinUri(dir_, "ckpt-*.reelckpt"));
  if (!objects.ok()) {
    if (objects.status().code() == StatusCode::kNotFound)
      return std::vector<std::pair<int64_t, std::string>>{};
    return objects.status();
  }
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& o : *objects)
    if (int64_t step = StepOf(o.uri); step >= 0) out.emplace_back(step, o.uri);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::string> CheckpointManager::ReadNewest(std::string* uri) {
  REEL_ASSIGN_OR_RETURN(auto all, List());
  if (all.empty()) return NotFoundError("no checkpoint (ckpt-*.reelckpt) in " + dir_);
  REEL_ASSIGN_OR_RETURN(Storage * storage, storage_.ForUri(dir_));
  const std::string& newest = all.back().second;
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadAll(*storage, newest));
  if (uri) *uri = newest;
  return bytes;
}

Result<CheckpointState> CheckpointManager::LoadNewest(std::string* uri) {
  std::string where;
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadNewest(&where));
  if (uri) *uri = where;
  return DecodeCheckpoint(bytes, where);
}

Result<CheckpointState> LoadCheckpoint(StorageResolver& storage, std::string_view path,
                                       std::string* uri) {
  if (StepOf(path) >= 0) {
    REEL_ASSIGN_OR_RETURN(Storage * s, storage.ForUri(path));
    REEL_ASSIGN_OR_RETURN(std::string bytes, ReadAll(*s, path));
    if (uri) *uri = std::string(path);
    return DecodeCheckpoint(bytes, path);
  }
  CheckpointManager manager(storage, std::string(path), 0);
  return manager.LoadNewest(uri);
}

}  // namespace reel::core

// libFuzzer target: checkpoint reading (core/src/checkpoint). The input is decoded twice: as the
// bytes of a checkpoint object, and as the payload inside a valid envelope (format version and
// CRC32C made to fit), so mutations reach the payload decoder instead of stopping at the
// checksum. Decoding must end in a state or a DataLoss error; a decoded state must encode and
// decode to the same state, and restoring it into a model of another layout must be refused
// without touching the model (RestoreParams' promise).
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "checkpoint.pb.h"
#include "reel/core/checkpoint.h"
#include "reel/recordio.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

bool SameState(const reel::core::CheckpointState& a, const reel::core::CheckpointState& b) {
  if (a.model_name != b.model_name || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const auto &x = a.params[i], &y = b.params[i];
    // Bytes, not floats: NaN payloads must survive too.
    if (x.name != y.name || x.shape != y.shape || x.values.size() != y.values.size()) return false;
    // Empty blocks (a zero dimension) have null data(), which memcmp must not see.
    if (!x.values.empty() &&
        std::memcmp(x.values.data(), y.values.data(), x.values.size() * sizeof(float)) != 0)
      return false;
  }
  return a.optimizer_state == b.optimizer_state && a.step == b.step && a.epoch == b.epoch &&
         a.schedule_step == b.schedule_step && a.data_positions == b.data_positions &&
         a.config_text == b.config_text && a.seed == b.seed && a.examples_seen == b.examples_seen &&
         a.world_size == b.world_size;
}

void DecodeAndCheck(std::string_view bytes) {
  using namespace reel::core;
  reel::Result<CheckpointState> state = DecodeCheckpoint(bytes, "fuzz.reelckpt");
  if (!state.ok()) {
    Require(state.status().code() == reel::StatusCode::kDataLoss);
    return;
  }
  reel::Result<CheckpointState> again = DecodeCheckpoint(EncodeCheckpoint(*state), "again");
  Require(again.ok() && SameState(*state, *again));

  reel::ParamArena arena;
  Require(arena.Declare("w", {2, 3}).ok());
  arena.Finalize();
  auto values = arena.values(0);
  std::fill(values.begin(), values.end(), 7.0f);
  reel::Status restored = RestoreParams(*state, "fuzz_model", arena, "fuzz.reelckpt");
  if (!restored.ok())
    for (float v : arena.values(0)) Require(v == 7.0f);
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it refuses; the refusal is what we check.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeAndCheck(bytes);
  reel::checkpoint::CheckpointFile envelope;
  envelope.set_format_version(1);
  envelope.set_payload(std::string(bytes));
  envelope.set_payload_crc32c(reel::recordio::Crc32c(bytes));
  DecodeAndCheck(envelope.SerializeAsString());
  return 0;
}

// Helpers for padded variable-length sequences: layout changes, reversal within each sequence's
// own length, and pooling over the valid frames.
//
// Layouts: "btd" is the Batch layout [B, T, D] (reel::Feature::values); "tbd" is time-major
// [T, B, D] (oneDNN's tnc), what the recurrent layers consume. Only frames t < lengths[b] are
// valid; every helper writes zeros into padding frames so stale values never leak across steps.
//
// Thread-safety: pure functions on caller-owned buffers.
#ifndef REEL_LAYERS_SEQUENCE_H_
#define REEL_LAYERS_SEQUENCE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"

namespace reel::layers {

enum class Pooling { kLast, kMean, kMax };

// "last" | "mean" | "max"; InvalidArgument naming option 'pooling' otherwise.
Result<Pooling> ParsePooling(const std::string& name);

// dst tbd [t_out, B, D] from src btd [B, t_in, D], frames t < lengths[b] only (t_out <= t_in);
// reversed=true stores frame lengths[b]-1-t at time t, i.e. each sequence reversed within its
// own length, so its padding stays at the end.
void BtdToTbd(const float* src, int64_t batch, int64_t t_in, int64_t dim,
              std::span<const int32_t> lengths, int64_t t_out, bool reversed, float* dst);

// dst tbd [T, B, D] = src tbd [T, B, D] with each sequence reversed within its length (an
// involution). dst must not alias src.
void ReverseTbd(const float* src, int64_t steps, int64_t batch, int64_t dim,
                std::span<const int32_t> lengths, float* dst);

// Pools x tbd [T, B, H] over each sequence's valid frames into columns [col, col + H) of
// y [B, y_ld]: kLast takes frame lengths[b]-1, kMean averages, kMax takes the per-channel
// maximum (remembering its frame in argmax [B, H], needed by PoolBackward; may be null otherwise).
void PoolForward(Pooling pooling, const float* x, int64_t steps, int64_t batch, int64_t hidden,
                 std::span<const int32_t> lengths, float* y, int64_t y_ld, int64_t col,
                 int32_t* argmax);

// dx tbd [T, B, H] (overwritten, zero outside the pooled frames) from dy's columns [col, col+H).
void PoolBackward(Pooling pooling, const float* dy, int64_t y_ld, int64_t col, int64_t steps,
                  int64_t batch, int64_t hidden, std::span<const int32_t> lengths,
                  const int32_t* argmax, float* dx);

// The same two on frames stored as rows anywhere: frame t (argmax's time order) of sequence b is
// row frame_row(t, b) of a matrix with row stride ld, its H values first (tbd is frame_row =
// t * B + b, ld = H; a packed layout keeps both directions' outputs in one row). PoolBackwardRows
// writes the H values of every valid frame's row (zeros where the pooling took nothing) and
// leaves all other memory alone.
using FrameRow = std::function<int64_t(int64_t t, int64_t b)>;
void PoolForwardRows(Pooling pooling, const float* x, int64_t ld, const FrameRow& frame_row,
                     int64_t batch, int64_t hidden, std::span<const int32_t> lengths, float* y,
                     int64_t y_ld, int64_t col, int32_t* argmax);
void PoolBackwardRows(Pooling pooling, const float* dy, int64_t y_ld, int64_t col, int64_t batch,
                      int64_t hidden, std::span<const int32_t> lengths, const int32_t* argmax,
                      float* dx, int64_t ld, const FrameRow& frame_row);

}  // namespace reel::layers

#endif  // REEL_LAYERS_SEQUENCE_H_

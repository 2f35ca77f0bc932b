#include "reel/layers/sequence.h"

#include <algorithm>
#include <cstring>

namespace reel::layers {

Result<Pooling> ParsePooling(const std::string& name) {
  if (name == "last") return Pooling::kLast;
  if (name == "mean") return Pooling::kMean;
  if (name == "max") return Pooling::kMax;
  return InvalidArgumentError("option 'pooling': unknown pooling '" + name +
                              "' (known: last, mean, max)");
}

void BtdToTbd(const float* src, int64_t batch, int64_t t_in, int64_t dim,
              std::span<const int32_t> lengths, int64_t t_out, bool reversed, float* dst) {
  for (int64_t t = 0; t < t_out; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      float* out = dst + (t * batch + b) * dim;
      const int64_t len = lengths[static_cast<size_t>(b)];
      if (t >= len) {
        std::memset(out, 0, static_cast<size_t>(dim) * sizeof(float));
        continue;
      }
      const int64_t s = reversed ? len - 1 - t : t;
      std::memcpy(out, src + (b * t_in + s) * dim, static_cast<size_t>(dim) * sizeof(float));
    }
  }
}

void ReverseTbd(const float* src, int64_t steps, int64_t batch, int64_t dim,
                std::span<const int32_t> lengths, float* dst) {
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      float* out = dst + (t * batch + b) * dim;
      const int64_t len = lengths[static_cast<size_t>(b)];
      if (t >= len) {
        std::memset(out, 0, static_cast<size_t>(dim) * sizeof(float));
        continue;
      }
      std::memcpy(out, src + ((len - 1 - t) * batch + b) * dim,
                  static_cast<size_t>(dim) * sizeof(float));
    }
  }
}

void PoolForwardRows(Pooling pooling, const float* x, int64_t ld, const FrameRow& frame_row,
                     int64_t batch, int64_t hidden, std::span<const int32_t> lengths, float* y,
                     int64_t y_ld, int64_t col, int32_t* argmax) {
  const size_t bytes = static_cast<size_t>(hidden) * sizeof(float);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    float* out = y + b * y_ld + col;
    auto frame = [&](int64_t t) { return x + frame_row(t, b) * ld; };
    switch (pooling) {
      case Pooling::kLast:
        std::memcpy(out, frame(len - 1), bytes);
        break;
      case Pooling::kMean: {
        std::fill_n(out, hidden, 0.0f);
        for (int64_t t = 0; t < len; ++t) {
          const float* f = frame(t);
          for (int64_t h = 0; h < hidden; ++h) out[h] += f[h];
        }
        const float inv = 1.0f / static_cast<float>(len);
        for (int64_t h = 0; h < hidden; ++h) out[h] *= inv;
        break;
      }
      case Pooling::kMax: {
        int32_t* arg = argmax + b * hidden;
        std::memcpy(out, frame(0), bytes);
        std::fill_n(arg, hidden, 0);
        for (int64_t t = 1; t < len; ++t) {
          const float* f = frame(t);
          for (int64_t h = 0; h < hidden; ++h)
            if (f[h] > out[h]) {
              out[h] = f[h];
              arg[h] = static_cast<int32_t>(t);
            }
        }
        break;
      }
    }
  }
}

void PoolBackwardRows(Pooling pooling, const float* dy, int64_t y_ld, int64_t col, int64_t batch,
                      int64_t hidden, std::span<const int32_t> lengths, const int32_t* argmax,
                      float* dx, int64_t ld, const FrameRow& frame_row) {
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    const float* g = dy + b * y_ld + col;
    auto frame = [&](int64_t t) { return dx + frame_row(t, b) * ld; };
    switch (pooling) {
      case Pooling::kLast:
        for (int64_t t = 0; t + 1 < len; ++t) std::fill_n(frame(t), hidden, 0.0f);
        std::copy_n(g, hidden, frame(len - 1));
        break;
      case Pooling::kMean: {
        const float inv = 1.0f / static_cast<float>(len);
        for (int64_t t = 0; t < len; ++t) {
          float* f = frame(t);
          for (int64_t h = 0; h < hidden; ++h) f[h] = g[h] * inv;
        }
        break;
      }
      case Pooling::kMax: {
        for (int64_t t = 0; t < len; ++t) std::fill_n(frame(t), hidden, 0.0f);
        const int32_t* arg = argmax + b * hidden;
        for (int64_t h = 0; h < hidden; ++h) frame(arg[h])[h] = g[h];
        break;
      }
    }
  }
}

void PoolForward(Pooling pooling, const float* x, int64_t steps, int64_t batch, int64_t hidden,
                 std::span<const int32_t> lengths, float* y, int64_t y_ld, int64_t col,
                 int32_t* argmax) {
  (void)steps;
  PoolForwardRows(
      pooling, x, hidden, [batch](int64_t t, int64_t b) { return t * batch + b; }, batch, hidden,
      lengths, y, y_ld, col, argmax);
}

void PoolBackward(Pooling pooling, const float* dy, int64_t y_ld, int64_t col, int64_t steps,
                  int64_t batch, int64_t hidden, std::span<const int32_t> lengths,
                  const int32_t* argmax, float* dx) {
  // The padding frames; PoolBackwardRows writes the valid ones.
  std::memset(dx, 0, static_cast<size_t>(steps * batch * hidden) * sizeof(float));
  PoolBackwardRows(pooling, dy, y_ld, col, batch, hidden, lengths, argmax, dx, hidden,
                   [batch](int64_t t, int64_t b) { return t * batch + b; });
}

}  // namespace reel::layers

// ParamArena: every parameter of a model, as named blocks in one contiguous value buffer and one
// gradient buffer of the same layout.
//
// A model declares its blocks (name + shape) during setup; Finalize() lays them out back to back
// (each block starts on a 16-float boundary so SIMD loads stay aligned) and allocates both buffers.
// Optimizers, collectives, the parameter server and checkpoints then work on values() and grads()
// as flat spans: a whole model is one message, with no copies.
//
// Lifetime: spans and block views stay valid for the arena's lifetime once finalized.
// Thread-safety: declaring and finalizing are single-threaded; after that, the layout is immutable
// and writes to the buffers need external coordination.
#ifndef REEL_PARAM_ARENA_H_
#define REEL_PARAM_ARENA_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/tensor.h"

namespace reel {

// Named parameter blocks over one value and one gradient buffer; see the file comment.
class ParamArena {
 public:
  // Position of a declared block; cheap to copy.
  struct Block {
    std::string name;
    Shape shape;
    int64_t offset = 0;  // in floats, from the start of the buffers
    int64_t size = 0;    // NumElements(shape)
  };
  using BlockId = int;

  ParamArena() = default;
  ParamArena(const ParamArena&) = delete;
  ParamArena& operator=(const ParamArena&) = delete;

  // Declares a block. Errors: a duplicate name, a non-positive dimension, or a finalized arena.
  Result<BlockId> Declare(std::string name, Shape shape) {
    if (finalized_)
      return FailedPreconditionError("parameter '" + name + "' declared after Finalize()");
    for (const auto& b : blocks_)
      if (b.name == name) return AlreadyExistsError("parameter '" + name + "' declared twice");
    for (int64_t d : shape)
      if (d <= 0)
        return InvalidArgumentError("parameter '" + name + "' has shape " + ShapeToString(shape));
    Block b{std::move(name), std::move(shape), total_, 0};
    b.size = NumElements(b.shape);
    total_ += (b.size + kAlign - 1) / kAlign * kAlign;
    blocks_.push_back(std::move(b));
    return static_cast<BlockId>(blocks_.size() - 1);
  }

  // Allocates both buffers, zero-filled. Idempotent.
  void Finalize() {
    if (finalized_) return;
    values_.reset(new float[static_cast<size_t>(total_)]());
    grads_.reset(new float[static_cast<size_t>(total_)]());
    finalized_ = true;
  }

  bool finalized() const { return finalized_; }
  int64_t total_size() const { return total_; }  // floats in each buffer, padding included
  const std::vector<Block>& blocks() const { return blocks_; }
  const Block& block(BlockId id) const { return blocks_[static_cast<size_t>(id)]; }

  // The block named `name`, or NotFound.
  Result<BlockId> Find(const std::string& name) const {
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].name == name) return static_cast<BlockId>(i);
    return NotFoundError("no parameter named '" + name + "'");
  }

  // The flat buffers. REQUIRES: finalized().
  std::span<float> values() { return {values_.get(), static_cast<size_t>(total_)}; }
  std::span<const float> values() const { return {values_.get(), static_cast<size_t>(total_)}; }
  std::span<float> grads() { return {grads_.get(), static_cast<size_t>(total_)}; }
  std::span<const float> grads() const { return {grads_.get(), static_cast<size_t>(total_)}; }

  // One block's values or gradients, as a span or as a Tensor view. REQUIRES: finalized().
  std::span<float> values(BlockId id) { return Slice(values_.get(), id); }
  std::span<float> grads(BlockId id) { return Slice(grads_.get(), id); }
  std::span<const float> values(BlockId id) const { return Slice(values_.get(), id); }
  std::span<const float> grads(BlockId id) const { return Slice(grads_.get(), id); }
  Tensor ValueTensor(BlockId id) { return Tensor::View(values(id).data(), block(id).shape); }
  Tensor GradTensor(BlockId id) { return Tensor::View(grads(id).data(), block(id).shape); }

  void ZeroGrads() {
    if (finalized_) std::fill(grads_.get(), grads_.get() + total_, 0.0f);
  }

 private:
  static constexpr int64_t kAlign = 16;
  std::span<float> Slice(float* base, BlockId id) const {
    const Block& b = block(id);
    return {base + b.offset, static_cast<size_t>(b.size)};
  }

  std::vector<Block> blocks_;
  int64_t total_ = 0;
  bool finalized_ = false;
  std::unique_ptr<float[]> values_;
  std::unique_ptr<float[]> grads_;
};

}  // namespace reel

#endif  // REEL_PARAM_ARENA_H_

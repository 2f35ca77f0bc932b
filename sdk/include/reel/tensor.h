// Tensor: a dense float32 array with a shape, row-major, either owning its values or viewing
// someone else's.
//
// Ownership: an owning Tensor holds its values in storage it shares with no other tensor: a
// 64-byte-aligned heap array, or memory adopted with a release function (TensorPool recycles
// batch buffers this way). A view holds a raw pointer whose storage must remain live (and not be
// resized) while the view is used. Copying a view copies the pointer, copying an owning tensor
// copies the values.
// Thread-safety: none internally; concurrent reads are fine, writes need external locking.
#ifndef REEL_TENSOR_H_
#define REEL_TENSOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace reel {

// Dimensions, outermost first, e.g. {B, T, D}.
using Shape = std::vector<int64_t>;

// The product of the dimensions (1 for a scalar's empty shape).
inline int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// "[32, 300, 1024]".
inline std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A dense float array of a Shape, row-major: owning its values or viewing someone else's.
class Tensor {
 public:
  static constexpr size_t kAlignment = 64;  // of storage from Uninitialized() (a cache line)

  Tensor() = default;
  // An owning tensor of `shape`, filled with `fill`.
  explicit Tensor(Shape shape, float fill = 0.0f) : Tensor(Uninitialized(std::move(shape))) {
    std::fill(data_, data_ + size(), fill);
  }
  // An owning tensor holding a copy of `values`; elements past values.size() are zero.
  Tensor(Shape shape, const std::vector<float>& values) : Tensor(Uninitialized(std::move(shape))) {
    const size_t n = std::min(values.size(), static_cast<size_t>(size()));
    std::copy(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n), data_);
    std::fill(data_ + n, data_ + size(), 0.0f);
  }
  // An owning tensor whose values are not initialised (like torch.empty): for producers that
  // write every element, so each output byte is written once. REQUIRES: the caller writes all
  // of values() before anyone reads them.
  // The storage is aligned to kAlignment bytes.
  static Tensor Uninitialized(Shape shape) {
    const auto n = static_cast<size_t>(NumElements(shape));
    auto* p =
        static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{kAlignment}));
    return Adopt(std::move(shape), std::shared_ptr<float[]>(p, [](float* q) {
                   ::operator delete[](q, std::align_val_t{kAlignment});
                 }));
  }
  // An owning tensor over `storage` (holding at least NumElements(shape) floats, which become
  // the values as they are), released through the shared_ptr's deleter when the tensor goes.
  // REQUIRES: no other tensor or code writes that storage while this tensor owns it.
  static Tensor Adopt(Shape shape, std::shared_ptr<float[]> storage) {
    Tensor t;
    t.shape_ = std::move(shape);
    t.owned_ = std::move(storage);
    t.data_ = t.owned_.get();
    return t;
  }
  // A view of `data`, which must outlive the tensor.
  static Tensor View(float* data, Shape shape) {
    Tensor t;
    t.shape_ = std::move(shape);
    t.data_ = data;
    return t;
  }

  // Copying an owning tensor copies its values; copying a view copies the pointer.
  Tensor(const Tensor& other) { *this = other; }
  Tensor& operator=(const Tensor& other) {
    if (this == &other) return *this;
    if (other.is_view() || other.data_ == nullptr) {
      shape_ = other.shape_;
      owned_.reset();
      data_ = other.data_;
      return *this;
    }
    *this = Uninitialized(other.shape_);
    std::copy(other.data_, other.data_ + other.size(), data_);
    return *this;
  }
  Tensor(Tensor&& other) noexcept { *this = std::move(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    shape_ = std::move(other.shape_);
    owned_ = std::move(other.owned_);
    data_ = other.data_;
    other.data_ = nullptr;
    other.shape_.clear();
    return *this;
  }

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return data_ ? NumElements(shape_) : 0; }
  bool is_view() const { return data_ != nullptr && owned_ == nullptr; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> values() { return {data_, static_cast<size_t>(size())}; }
  std::span<const float> values() const { return {data_, static_cast<size_t>(size())}; }

  // Reinterprets the shape; REQUIRES: same number of elements.
  void Reshape(Shape shape) { shape_ = std::move(shape); }

 private:
  Shape shape_;
  std::shared_ptr<float[]> owned_;  // null for views and empty tensors; never shared by tensors
  float* data_ = nullptr;
};

}  // namespace reel

#endif  // REEL_TENSOR_H_

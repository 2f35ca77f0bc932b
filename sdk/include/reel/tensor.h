// Tensor: a dense float32 array with a shape, row-major, either owning its values or viewing
// someone else's.
//
// Ownership: an owning Tensor holds its values in a std::vector; a view holds a raw pointer whose
// storage must remain live (and not be resized) while the view is used. Copying a view copies the
// pointer, copying an owning tensor copies the values.
// Thread-safety: none internally; concurrent reads are fine, writes need external locking.
#ifndef REEL_TENSOR_H_
#define REEL_TENSOR_H_

#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace reel {

using Shape = std::vector<int64_t>;

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

class Tensor {
 public:
  Tensor() = default;
  // An owning tensor of `shape`, filled with `fill`.
  explicit Tensor(Shape shape, float fill = 0.0f)
      : shape_(std::move(shape)), owned_(static_cast<size_t>(NumElements(shape_)), fill) {
    data_ = owned_.data();
  }
  // An owning tensor taking `values`. REQUIRES: values.size() == NumElements(shape).
  Tensor(Shape shape, std::vector<float> values) : shape_(std::move(shape)), owned_(std::move(values)) {
    data_ = owned_.data();
  }
  // A view of `data`, which must outlive the tensor.
  static Tensor View(float* data, Shape shape) {
    Tensor t;
    t.shape_ = std::move(shape);
    t.data_ = data;
    return t;
  }

  Tensor(const Tensor& other) { *this = other; }
  Tensor& operator=(const Tensor& other) {
    if (this == &other) return *this;
    shape_ = other.shape_;
    owned_ = other.owned_;
    data_ = other.is_view() ? other.data_ : owned_.data();
    return *this;
  }
  Tensor(Tensor&& other) noexcept { *this = std::move(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    bool view = other.is_view();
    shape_ = std::move(other.shape_);
    owned_ = std::move(other.owned_);
    data_ = view ? other.data_ : owned_.data();
    other.data_ = nullptr;
    other.shape_.clear();
    return *this;
  }

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return data_ ? NumElements(shape_) : 0; }
  bool is_view() const { return data_ != nullptr && data_ != owned_.data(); }

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> values() { return {data_, static_cast<size_t>(size())}; }
  std::span<const float> values() const { return {data_, static_cast<size_t>(size())}; }

  // Reinterprets the shape; REQUIRES: same number of elements.
  void Reshape(Shape shape) { shape_ = std::move(shape); }

 private:
  Shape shape_;
  std::vector<float> owned_;
  float* data_ = nullptr;
};

}  // namespace reel

#endif  // REEL_TENSOR_H_

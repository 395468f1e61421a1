#pragma once
/// \file
/// A read-only array that may share ownership of what holds it: per-sample labels and lengths
/// handed to the samplers, whether they live in a vector or in memory shared by a node's ranks.

#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

namespace strider {

/// `size()` values of T, read-only, and what keeps them alive. Three kinds:
/// - from a `std::shared_ptr<const std::vector<T>>` (implicit, the usual case): owns the vector;
/// - `SharedView(owner, data, size)`: shares ownership of anything (a shared-memory segment);
/// - `SharedView::borrow(...)`: owns nothing, valid while the holder lives (a reader's arrays, which
///   outlive every sampler of the Loader that borrows them).
/// A default-constructed view is null (`!view`), as a null pointer was; a view of an empty vector is
/// present and empty. Cheap to copy (a shared_ptr, a pointer and a size). Thread-safe to read.
template <typename T>
class SharedView {
  static_assert(!std::is_const_v<T>, "SharedView<T> is already read-only");

 public:
  SharedView() noexcept = default;
  SharedView(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor): null, as a pointer
  /// Owns the vector (null gives a null view).
  SharedView(std::shared_ptr<const std::vector<T>> vector) noexcept  // NOLINT(google-explicit-constructor)
      : data_(vector ? vector->data() : nullptr), size_(vector ? vector->size() : 0), present_(vector != nullptr) {
    owner_ = std::move(vector);
  }
  SharedView(std::shared_ptr<std::vector<T>> vector) noexcept  // NOLINT(google-explicit-constructor)
      : SharedView(std::shared_ptr<const std::vector<T>>(std::move(vector))) {}
  /// `size` values at `data`, kept alive by `owner` (may be null: then the caller keeps them alive).
  SharedView(std::shared_ptr<const void> owner, const T* data, std::size_t size) noexcept
      : owner_(std::move(owner)), data_(data), size_(size), present_(true) {}

  /// A view that owns nothing: `values` must outlive it and every copy of it.
  static SharedView borrow(const std::vector<T>& values) noexcept {
    return SharedView(nullptr, values.data(), values.size());
  }

  /// False for a null view (no array given), true for any other, an empty one included.
  explicit operator bool() const noexcept { return present_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const T& operator[](std::size_t index) const noexcept { return data_[index]; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  /// A copy of the values.
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

 private:
  std::shared_ptr<const void> owner_;
  const T* data_ = nullptr;
  std::size_t size_ = 0;
  bool present_ = false;
};

}  // namespace strider

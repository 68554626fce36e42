// A Tensor is a non-owning view: a pointer into a backend's memory, an element type and a
// number of elements. Shapes live in the code that uses the tensor (the op headers document
// them); keeping the view flat keeps every kernel launcher's arguments explicit.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace tt {

struct Tensor {
  void* ptr = nullptr;
  DType dtype = DType::F32;
  int64_t numel = 0;

  size_t bytes() const { return size_t(numel) * dtype_size(dtype); }
  bool empty() const { return ptr == nullptr; }

  Tensor slice(int64_t offset, int64_t n) const {
    TT_CHECK(offset >= 0 && n >= 0 && offset + n <= numel,
             "tensor slice [" + std::to_string(offset) + ", +" + std::to_string(n) +
                 ") outside " + std::to_string(numel) + " elements");
    return Tensor{static_cast<char*>(ptr) + size_t(offset) * dtype_size(dtype), dtype, n};
  }

  template <class T>
  T* data() const {
    TT_CHECK(dtype == dtype_of<T>::value, std::string("tensor holds ") + dtype_name(dtype) +
                                              ", accessed as " + dtype_name(dtype_of<T>::value));
    return static_cast<T*>(ptr);
  }
};

}  // namespace tt

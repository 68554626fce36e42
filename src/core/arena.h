// One block of backend memory for the whole run, carved into tensors by category.
//
// The model describes every buffer it needs in a layout function that calls take(). The
// function runs twice: a measuring pass (take() returns views with null pointers and adds
// up the sizes), then commit() makes the one allocation, then a second pass hands out the
// real pointers. Nothing is allocated after start-up, so peak memory per category is known
// exactly, and running out of memory can only happen at start, with a clear message.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.h"

namespace tt {

enum class Category : int { Parameters, Gradients, OptimizerState, Activations, Workspace };
constexpr int kNumCategories = 5;
const char* category_name(Category c);

// Where an arena's block comes from: host memory or device memory.
struct MemoryResource {
  virtual ~MemoryResource() = default;
  // Returns the block, or throws UsageError saying how much was asked (`breakdown` says for
  // what), how much is free, and which flags to lower.
  virtual void* allocate(size_t bytes, const std::string& breakdown) = 0;
  virtual void deallocate(void* p) = 0;
};

class Arena {
 public:
  static constexpr size_t kAlignment = 256;

  explicit Arena(MemoryResource& memory) : memory_(memory) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Runs `layout` to measure, allocates, and runs it again to hand out pointers.
  void build(const std::function<void(Arena&)>& layout);
  // Only the measuring pass: bytes() tells what build() would allocate; nothing is allocated.
  void measure(const std::function<void(Arena&)>& layout);

  Tensor take(Category c, DType dtype, int64_t numel);

  size_t bytes(Category c) const { return committed_[int(c)]; }
  // The built block's bytes from its start through the region of `last` (the regions lie in the
  // order of Category).
  char* base() const { return base_; }
  size_t bytes_through(Category last) const { return region_[int(last)] + committed_[int(last)]; }
  size_t total_bytes() const;
  // "parameters 128.0 MB, gradients 128.0 MB, ..." of the committed (or measured) layout.
  std::string breakdown() const;
  bool committed() const { return base_ != nullptr; }

 private:
  MemoryResource& memory_;
  char* base_ = nullptr;
  bool measuring_ = true;
  std::array<size_t, kNumCategories> used_{};       // bytes taken in the current pass
  std::array<size_t, kNumCategories> committed_{};  // bytes per category after build()
  std::array<size_t, kNumCategories> region_{};     // offset of each category's region
};

// MemAvailable of /proc/meminfo (0 where it cannot be read): Linux grants allocations lazily, so
// host memory beyond this is not refused but killed by the kernel partway through.
size_t available_host_bytes();

// Host memory, 64-byte aligned.
struct HostMemory : MemoryResource {
  void* allocate(size_t bytes, const std::string& breakdown) override;
  void deallocate(void* p) override;
};

}  // namespace tt

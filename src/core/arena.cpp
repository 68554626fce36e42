#include "core/arena.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace tt {

const char* category_name(Category c) {
  switch (c) {
    case Category::Parameters: return "parameters";
    case Category::Gradients: return "gradients";
    case Category::OptimizerState: return "optimizer state";
    case Category::Activations: return "activations";
    case Category::Workspace: return "workspace";
  }
  return "?";
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

Arena::~Arena() {
  if (base_) memory_.deallocate(base_);
}

void Arena::build(const std::function<void(Arena&)>& layout) {
  measure(layout);
  size_t offset = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    region_[c] = offset;
    offset += committed_[c];
  }
  if (offset == 0) offset = kAlignment;
  base_ = static_cast<char*>(memory_.allocate(offset, breakdown()));
  measuring_ = false;
  used_ = {};
  layout(*this);
  TT_CHECK(used_ == committed_, "arena layout changed between its two passes");
}

void Arena::measure(const std::function<void(Arena&)>& layout) {
  TT_CHECK(base_ == nullptr, "arena built twice");
  measuring_ = true;
  used_ = {};
  layout(*this);
  committed_ = used_;
}

Tensor Arena::take(Category c, DType dtype, int64_t numel) {
  TT_CHECK(numel >= 0, "negative tensor size");
  const size_t bytes = align_up(size_t(numel) * dtype_size(dtype), kAlignment);
  const size_t offset = used_[int(c)];
  used_[int(c)] += bytes;
  if (measuring_) return Tensor{nullptr, dtype, numel};
  TT_CHECK(used_[int(c)] <= committed_[int(c)], "arena layout asked for more than it measured");
  return Tensor{base_ + region_[int(c)] + offset, dtype, numel};
}

size_t Arena::total_bytes() const {
  size_t total = 0;
  for (size_t b : committed_) total += b;
  return total;
}

std::string Arena::breakdown() const {
  std::string s;
  char buf[64];
  for (int c = 0; c < kNumCategories; ++c) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f MB", c ? ", " : "", category_name(Category(c)), committed_[c] / 1e6);
    s += buf;
  }
  return s;
}

size_t available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    size_t kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:") return kb * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

void* HostMemory::allocate(size_t bytes, const std::string& breakdown) {
  const size_t available = available_host_bytes();
  const bool too_much = available && bytes > available;
  void* p = too_much ? nullptr : std::aligned_alloc(64, align_up(bytes, 64));
  if (!p) {
    // Beyond the machine's memory, or (the machine has it) beyond the process's own limit.
    rlimit limit{};
    const bool limited = ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
    const std::string why = too_much ? std::to_string(available >> 20) + " MiB are available"
                            : limited ? "more than this process may take: its address space is limited to " +
                                            std::to_string(limit.rlim_cur >> 20) + " MiB (ulimit -v)"
                                      : std::string("and the allocation failed");
    usage_fail("out of host memory: the run needs " + std::to_string(bytes >> 20) + " MiB (" + breakdown + "), " + why +
               "; lower --batch-size or --seq-len, or the model's size");
  }
  return p;
}

void HostMemory::deallocate(void* p) { std::free(p); }

}  // namespace tt

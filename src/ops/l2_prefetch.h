// prefetch-weights: the bytes the next kernel of ours launched on a stream asks into L2 before its
// wait (Successor::l2, ops/cuda_common.cuh). The backend sets them just before an operation that
// launches a kernel of ours; the next such launch on the stream takes them, whichever operation it
// belongs to (after cuDNN's attention, which launches none of ours, a later kernel: too late to
// help, harmless). One pending request per host thread, as the launches are made from one; a
// backend clears it when it goes, with the memory the request names. The prefetch instruction
// takes a 16-byte-aligned address: a request for bytes elsewhere is dropped (the product loads them).
#pragma once
#include <cstdint>

struct CUstream_st;

namespace tt::cuda {

struct L2Prefetch {
  CUstream_st* stream = nullptr;  // taken only by a launch on this stream
  const void* bytes_at = nullptr;
  int64_t bytes = 0;
};
inline L2Prefetch& pending_l2_prefetch() {
  static thread_local L2Prefetch pending;
  return pending;
}
inline void prefetch_with_next_launch(CUstream_st* stream, const void* at, int64_t bytes) {
  const bool aligned = reinterpret_cast<uintptr_t>(at) % 16 == 0;
  pending_l2_prefetch() = aligned ? L2Prefetch{stream, at, bytes} : L2Prefetch{};
}

}  // namespace tt::cuda

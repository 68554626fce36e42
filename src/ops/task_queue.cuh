// The persistent kernels' queue (block_forward.cu, block_backward.cu): a block an SM takes the next
// task from a counter in global memory, and a task waits for the tasks it reads from through
// counters in global memory, not through kernel boundaries.
//
// A task's block counts it done once its stores are issued (count_done: the block's barrier, then
// thread 0's release); a task that reads them waits until the count reaches its target
// (wait_for: thread 0's acquire, then a proxy fence, because the tensor memory accelerator reads
// through the async proxy what other blocks stored through the generic one). Tasks are taken in
// order and every dependency is an earlier task, taken by a block that runs, so the queue cannot
// deadlock however many blocks are resident. A wait that lasts ten seconds traps: a bug, reported
// as an error, not a hang. The last block to leave sets the queue and the counters back to zero for
// the next launch.
#pragma once
#include <cooperative_groups.h>

#include "ops/cuda_common.cuh"
#include "ops/hopper.cuh"

namespace tt::cuda {

// The persistent kernels' checks of their operands: each tensor of the type, on a 16-byte boundary,
// with at least its elements.
inline bool tensors_of(DType type, std::initializer_list<std::pair<const Tensor*, int64_t>> ts) {
  for (auto [t, numel] : ts)
    if (t->dtype != type || !aligned16(t->ptr) || t->numel < numel) return false;
  return true;
}

namespace queue {

// sync[0] the queue, sync[1] the blocks that left, then the counters.
constexpr int kHeader = 2;

__device__ __forceinline__ uint64_t nanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int load_acquire(const int* c) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
  return v;
}
// Every thread of the block: once the counter reaches target, what the tasks it counts stored is
// visible to the block's loads, TMA's included.
__device__ __forceinline__ void wait_for(const int* c, int target) {
  if (threadIdx.x == 0) {
    const uint64_t start = nanoseconds();
    while (load_acquire(c) < target)
      if (nanoseconds() - start > 10000000000ull) __trap();  // ten seconds: a task that never finished
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }
  __syncthreads();
}
// Every thread, once its stores are issued: the task counted, its stores released with the count
// (the block's barrier orders them before thread 0's release). The reader's proxy fence is the one
// the PTX memory model asks for; this one orders the stores for the async proxy on the writer's side
// as well, at no measurable cost.
__device__ __forceinline__ void count_done(int* c) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(c) : "memory");
  }
}

// The block leaves: the last to leave zeroes sync[0 .. kHeader + counters). The fences order every
// block's counts before its leaving, and the zeroing after all of them.
__device__ __forceinline__ void leave(int* sync, int counters) {
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync + 1, 1) == int(gridDim.x) - 1) {
      __threadfence();
      for (int i = 0; i < kHeader + counters; ++i) sync[i] = 0;
    }
  }
}

// The block's loop: takes tasks 0 .. total - 1 in turn and runs `run(task)` with kBarriers fresh
// barriers at `bars` (a task's slot at `slot`, 4 bytes of shared memory), then leaves; the last
// block to leave zeroes sync[0 .. kHeader + counters).
template <int kBarriers, class Run>
__device__ __forceinline__ void run_tasks(int* sync, int total, int counters, uint32_t bars, int* slot, Run&& run) {
  for (bool first = true;; first = false) {
    __syncthreads();  // the task before is done with shared memory and the slot
    if (threadIdx.x == 0) slot[0] = atomicAdd(sync, 1);
    // What the task before read and wrote through the generic proxy, before TMA writes the buffers.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (!first) mbar_inval_all(bars, kBarriers);  // at rest: the task before waited for every chunk
    mbar_init_all(bars, kBarriers);
    __syncthreads();
    const int task = slot[0];
    if (task >= total) break;
    run(task);
  }
  leave(sync, counters);
}

// The same for the blocks of a cluster taking tasks together (the attention's backward adds a kv
// head's group through distributed shared memory): rank 0 takes cluster task t and hands it to every
// rank's slot, two slots in turn (a rank reads slot k % 2 after round k's barrier, and rank 0 writes
// it again only in round k + 2, past round k + 1's, which the rank reaches after its read); block
// `rank` runs part t * size + rank of the tasks. total: the cluster tasks.
template <int kBarriers, class Run>
__device__ __forceinline__ void run_cluster_tasks(int* sync, int total, int counters, uint32_t bars, int* slots,
                                                  Run&& run) {
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = int(cluster.block_rank()), size = int(cluster.num_blocks());
  cluster.sync();  // every block of the cluster has started: its shared memory may be written
  for (int round = 0;; ++round) {
    __syncthreads();  // the task before is done with shared memory
    if (rank == 0 && threadIdx.x == 0) {
      const int t = atomicAdd(sync, 1);
      for (int r = 0; r < size; ++r) *cluster.map_shared_rank(slots + round % 2, r) = t;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (round > 0) mbar_inval_all(bars, kBarriers);
    mbar_init_all(bars, kBarriers);
    cluster.sync();  // every rank's slot written, and the barriers initialized
    const int task = slots[round % 2];
    if (task >= total) break;
    run(task * size + rank);
  }
  leave(sync, counters);
}

}  // namespace queue
}  // namespace tt::cuda

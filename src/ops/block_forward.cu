// The transformer blocks' forward in one persistent launch (see block_forward.h for the contract).
//
// Why: at the default shape (8 x 128 tokens) a layer's forward is seven kernels of 2-12 us, each
// paying its start, its end and a partly empty GPU, and each waiting for the whole of the one before
// (docs/versions/v6.md). Here a block an SM takes tasks from a queue in global memory, and a task
// waits only for the rows it reads: a row block of 128 tokens (one sequence) goes on to its
// attention, its output product and its FFN while other row blocks are still in their QKV product.
// Measured, it does not pay at the default shape (opt-in): each stage there is at most one wave and
// needs whole rows of the one before, so the row blocks run the same chain together and only the
// boundaries are saved, which programmatic launch had mostly saved already (v6 1.074 -> 1.122 ms a
// step on an H200, docs/data/2026-11-30-h200-blocks-forward).
//
// The tasks of a layer, stage after stage, each stage's over the row blocks:
//   QKV        a 128 x 64 tile of the QKV product, RoPE in its epilogue (rope_product.cuh)   Q / 64
//   attention  a head of a sequence: flash_tiles.cuh's forward of a block of 128 queries     H
//   output     a 128 x 32 tile of att Wo^T + x, the residual added in the epilogue: x_mid     C / 32
//   FFN norm   16 rows of x_mid normalized: xn2                                              8
//   gate/up    a 128 x (128 + 128) tile, SwiGLU in its epilogue (gated_product.cuh)          F / 128
//   down       a 128 x 32 tile of h Wdown^T + x_mid: the next layer's x                      C / 32
//   next norm  16 rows of it normalized (the next layer's attention norm, or the final one)  8
// (a row block's count of each on the right). The norms keep the RMSNorm kernel's order of sums and
// roundings (rmsnorm.cuh). The residual products' sums run as our other tiles' do, in cuBLAS's
// order, and cuBLAS's beta = 1 adds the residual to the fp32 sum before the one rounding, as the
// epilogue here does.
//
// Dependencies are counters in global memory, one a stage and row block, counting up through the
// layers: a task waits until the stage before it has finished its row block (task_queue.cuh says how
// the queue and its counters work). A product's task asks for its first weights before it waits.
#include "ops/block_forward.h"

#include <algorithm>

#include "ops/flash_tiles.cuh"
#include "ops/gated_product.cuh"
#include "ops/rmsnorm.cuh"
#include "ops/rope_product.cuh"
#include "ops/task_queue.cuh"

namespace tt::cuda {
namespace {

using namespace tile;
using queue::count_done;
using queue::wait_for;

constexpr int kMaxLayers = 16, kMaxRowBlocks = 8, kMaxHidden = 1024;
enum Stage { kQkv, kAttention, kOutput, kFfnNorm, kGateUp, kDown, kNextNorm, kStageCount };
constexpr int kNormRows = 16;  // a norm task's rows: two a warp, their loads in flight together

// sum = a W^T + residual in tiles of 128 x 32, eight buffers: 128 tiles a stage at the default shape,
// one wave (tiles of 128 x 64, half a wave, took the forward 376 against 368 us on an H200,
// docs/data/2026-11-30-h200-blocks-forward).
constexpr int kResidualN = 32, kResidualBuffers = 8, kResidualEarly = 2;
struct ResidualOp {
  CUtensorMap a, w;  // a [n, K] in boxes of 64 columns by 128 rows, W [C, K] by kResidualN rows
  const bf16_t* residual;
  bf16_t* sum;  // [n, C], as the residual
  int k;
};
struct NormOp {
  const bf16_t* x;  // [n, C]
  const bf16_t* w;
  bf16_t* out;
  float* rstd;
};
struct Layer {
  rope_tile::RopeOp qkv;
  gated_tile::Forward gate_up;
  ResidualOp output, down;
  NormOp ffn_norm, next_norm;
  bf16_t* att;
  float* lse;
};
struct Op {
  Layer layers[kMaxLayers];
  int* sync;  // [0] the queue, [1] the blocks that left, then a counter a stage and row block
  AttnShape attn;
  float scale_log2, eps;
  int layer_count, row_blocks, c, tiles[kStageCount];  // a row block's tasks of each stage
  int per_layer;                                        // a layer's tasks, every row block's
};

constexpr int kBuffersBytes =
    std::max({rope_tile::kBuffersBytes, gated_tile::kBuffersBytes, kResidualBuffers * (kABytes + kResidualN * 128),
              flash::Smem<64>::bytes(flash::Tiles<64, 2>::kRows + 2 * flash::Tiles<64, 2>::kFwdStages * flash::kTileKeys)});
constexpr int kBarriers = 8;  // the most buffers a tile has
constexpr int kSmem = kBuffersBytes + 8 * kBarriers + 16 + kSmemAlign;  // then the task

__device__ __forceinline__ int* counter(const Op& op, int stage, int m) {
  return op.sync + queue::kHeader + stage * kMaxRowBlocks + m;
}

// Rows r0 .. r0 + kNormRows - 1 normalized, each warp two rows with all their loads in flight; a
// row as rmsnorm_fused_forward_kernel<bf16_t, 8, false> makes it (lane l sums the squares of the
// 16-byte vectors l, l + 32, ... in order). x is read from L2: other blocks wrote it in this launch.
__device__ __forceinline__ void normalize_rows(const NormOp& op, int r0, int c, float eps) {
  using V = Vec<bf16_t, 8>;
  constexpr int kAtOnce = kNormRows / (kThreads / 32), kLaneVectors = kMaxHidden / 8 / 32;
  const int lane = threadIdx.x % 32, nv = c / 8;
  r0 += kAtOnce * int(threadIdx.x / 32);
  V v[kAtOnce][kLaneVectors];
#pragma unroll
  for (int i = 0; i < kAtOnce; ++i)
#pragma unroll
    for (int k = 0; k < kLaneVectors; ++k)
      if (lane + 32 * k < nv) {
        const int4 raw = __ldcg(reinterpret_cast<const int4*>(op.x + int64_t(r0 + i) * c + (lane + 32 * k) * 8));
        v[i][k] = *reinterpret_cast<const V*>(&raw);
      }
#pragma unroll
  for (int i = 0; i < kAtOnce; ++i) {
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < kLaneVectors; ++k)
      if (lane + 32 * k < nv) sq += sum_squares(v[i][k]);
    const float r = row_rstd(sq, c, eps);
    if (lane == 0) op.rstd[r0 + i] = r;
#pragma unroll
    for (int k = 0; k < kLaneVectors; ++k)
      if (lane + 32 * k < nv) {
        const int j = (lane + 32 * k) * 8;
        scaled(v[i][k], r, V::load(op.w + j)).store(op.out + int64_t(r0 + i) * c + j);
      }
  }
}

// The residual products' tile: rows m0.., columns c0.. of a W^T, plus the residual's, rounded once.
template <class Wait>
__device__ __forceinline__ void residual_tile(const ResidualOp& op, int ld, unsigned char* smem, uint32_t bars, int m0,
                                              int c0, Wait&& wait) {
  float acc[1][kResidualN / 2];
  linear_tile_sums<kResidualN, kResidualBuffers, kResidualEarly>(acc, smem, bars, op.k, op.a, op.w, m0, c0, wait);
  constexpr int kPitch = kResidualN * 2 + 16;  // a staged row
  const Fragment fr;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = fr.row0 + 8 * r;
    const __nv_bfloat162* res = reinterpret_cast<const __nv_bfloat162*>(op.residual + int64_t(m0 + row) * ld + c0);
    __nv_bfloat162 x[kResidualN / 8];  // all read before any is used
#pragma unroll
    for (int n = 0; n < kResidualN / 8; ++n) x[n] = __ldcg(res + 4 * n + fr.t);
#pragma unroll
    for (int n = 0; n < kResidualN / 8; ++n) {
      const int i = 4 * n + 2 * r;
      *fr.staged(smem, kPitch, row, n) =
          __floats2bfloat162_rn(acc[0][i] + __low2float(x[n]), acc[0][i + 1] + __high2float(x[n]));
    }
  }
  write_staged<1, kResidualN>(smem, [&](int r, int) { return op.sum + int64_t(m0 + r) * ld + c0; });
}

__device__ __forceinline__ void run_task(const Op& op, int task, unsigned char* smem, uint32_t bars) {
  const int l = task / op.per_layer;
  int rest = task % op.per_layer, stage = 0;
  while (rest >= op.row_blocks * op.tiles[stage]) rest -= op.row_blocks * op.tiles[stage++];
  const int m = rest / op.tiles[stage], j = rest % op.tiles[stage], m0 = m * kRows;
  const Layer& L = op.layers[l];
  // How far a stage has counted once the first `layers` layers' row block m is done with it.
  auto done = [&](int s, int layers) { return op.tiles[s] * layers; };
  switch (stage) {
    case kQkv:
      rope_tile::qkv_rope_tile(L.qkv, smem, bars, m0, j * rope_tile::kN, [&] {
        if (l > 0) wait_for(counter(op, kNextNorm, m), done(kNextNorm, l));  // layer 0's rows: the kernel before
      });
      count_done(counter(op, kQkv, m));
      break;
    case kAttention:
      wait_for(counter(op, kQkv, m), done(kQkv, l + 1));
      flash::flash_forward_tile<64, 2, false, false>(smem, m, j, 0, L.att, L.lse, L.qkv.qkv, nullptr, op.attn,
                                                     op.scale_log2, Fp8Out{});
      count_done(counter(op, kAttention, m));
      break;
    case kOutput:
      residual_tile(L.output, op.c, smem, bars, m0, j * kResidualN,
                    [&] { wait_for(counter(op, kAttention, m), done(kAttention, l + 1)); });
      count_done(counter(op, kOutput, m));
      break;
    case kFfnNorm:
    case kNextNorm:
      wait_for(counter(op, stage - 1, m), done(stage - 1, l + 1));
      normalize_rows(stage == kFfnNorm ? L.ffn_norm : L.next_norm, m0 + j * kNormRows, op.c, op.eps);
      count_done(counter(op, stage, m));
      break;
    case kGateUp:
      gated_tile::gate_up_swiglu_tile(L.gate_up, smem, bars, m0, j * kCols,
                                      [&] { wait_for(counter(op, kFfnNorm, m), done(kFfnNorm, l + 1)); });
      count_done(counter(op, kGateUp, m));
      break;
    default:
      residual_tile(L.down, op.c, smem, bars, m0, j * kResidualN,
                    [&] { wait_for(counter(op, kGateUp, m), done(kGateUp, l + 1)); });
      count_done(counter(op, kDown, m));
  }
}

// "gemm" in its name books it to the profile's products (trace.cpp, kernel_family): most of its
// time is theirs.
__global__ void __launch_bounds__(kThreads, 1) block_forward_gemm_kernel(Successor next, const __grid_constant__ Op op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuffersBytes);
  int* slot = reinterpret_cast<int*>(smem + kBuffersBytes + 8 * kBarriers);  // the task
  await_previous_kernel(next);
  queue::run_tasks<kBarriers>(op.sync, op.per_layer * op.layer_count, kStageCount * kMaxRowBlocks, bars, slot,
                              [&](int task) { run_task(op, task, smem, bars); });
}

}  // namespace

std::string block_forward_misfit(const BlockForward& f) {
  const AttnShape& a = f.attn;
  const int64_t n = f.tokens();
  const int C = f.hidden, F = f.intermediate, Q = int(a.ld()), HD = a.H * a.D;
  if (f.layers.empty() || f.layers.size() > size_t(kMaxLayers))
    return std::to_string(f.layers.size()) + " layers (1 to " + std::to_string(kMaxLayers) + ")";
  if (a.T != kRows) return "sequences of " + std::to_string(a.T) + " tokens, not " + std::to_string(kRows);
  if (n <= 0 || n > int64_t(kMaxRowBlocks) * kRows)
    return std::to_string(n) + " tokens (1 to " + std::to_string(kMaxRowBlocks * kRows) + ")";
  if (a.D != 64) return "head size " + std::to_string(a.D) + ", not 64";  // then Q and H D are multiples of 64 too
  if (C <= 0 || C % 64 || C > kMaxHidden || F <= 0 || F % 128)
    return "hidden " + std::to_string(C) + " (a multiple of 64 up to " + std::to_string(kMaxHidden) + ") or FFN " +
           std::to_string(F) + " (of 128)";
  if (f.ropes.size() != 1) return "the queries and the keys rotated in two calls (without custom-rope)";
  const RopeShape& r = f.ropes[0];
  if (r.col != 0 || r.ld != Q || r.tokens != n || r.seq_len != a.T || r.head_dim != a.D || r.heads > a.H + a.KVH)
    return "RoPE not on the queries' and keys' heads from column 0";
  if (!tensors_of(DType::F32, {{&f.rope_table, int64_t(a.T) * a.D}})) return "no fp32 RoPE table";
  for (size_t i = 0; i < f.layers.size(); ++i) {
    const BlockLayer& l = f.layers[i];
    if (i > 0 && (l.xn1.ptr != f.layers[i - 1].xn_next.ptr || l.x.ptr != f.layers[i - 1].x_next.ptr))
      return "a layer's input not the output of the layer before";
    if (!tensors_of(DType::BF16, {{&l.xn1, n * C},
                                  {&l.qkv, n * Q},
                                  {&l.att, n * HD},
                                  {&l.x, n * C},
                                  {&l.x_mid, n * C},
                                  {&l.xn2, n * C},
                                  {&l.gateup, n * 2 * F},
                                  {&l.h, n * F},
                                  {&l.x_next, n * C},
                                  {&l.xn_next, n * C},
                                  {&l.wqkv, int64_t(Q) * C},
                                  {&l.wo, int64_t(C) * HD},
                                  {&l.ffn_norm, C},
                                  {&l.wgateup, 2 * int64_t(F) * C},
                                  {&l.wdown, int64_t(C) * F},
                                  {&l.next_norm, C}}))
      return "operands not bf16 of their sizes on 16-byte boundaries";
    if (!tensors_of(DType::F32, {{&l.saved, int64_t(a.B) * a.H * a.T}, {&l.rstd2, n}, {&l.rstd_next, n}}))
      return "statistics not fp32 of their sizes (the attention's: the log-sum-exp of each row)";
  }
  return "";
}

void block_forward(const BlockForward& f, const Tensor& sync, int sms, Stream s) {
  TT_CHECK(block_forward_misfit(f).empty(), "block_forward: " + block_forward_misfit(f));
  TT_CHECK(sync.dtype == DType::I32 && sync.numel >= kBlockForwardSyncInts, "block_forward: the sync ints");
  static_assert(queue::kHeader + kStageCount * kMaxRowBlocks <= kBlockForwardSyncInts, "the counters fit");
  static_assert(sizeof(Op) <= 32764, "a kernel's parameters are at most 32 KB");
  const AttnShape& a = f.attn;
  const int64_t n = f.tokens();
  const int C = f.hidden, F = f.intermediate, Q = int(a.ld()), HD = a.H * a.D;
  Op op{};
  for (size_t i = 0; i < f.layers.size(); ++i) {
    const BlockLayer& l = f.layers[i];
    Layer& L = op.layers[i];
    L.qkv = {bf16_boxes(l.xn1, n, C, C, kRows), bf16_boxes(l.wqkv, Q, C, C, rope_tile::kN), static_cast<bf16_t*>(l.qkv.ptr),
             f.rope_table.data<float>(), C, Q, f.ropes[0].heads * f.ropes[0].head_dim, a.T, a.D};
    L.gate_up = {bf16_boxes(l.xn2, n, C, C, kRows), bf16_boxes(l.wgateup, 2 * int64_t(F), C, C, kCols),
                 static_cast<bf16_t*>(l.gateup.ptr), static_cast<bf16_t*>(l.h.ptr), C, F};
    L.output = {bf16_boxes(l.att, n, HD, HD, kRows), bf16_boxes(l.wo, C, HD, HD, kResidualN),
                static_cast<const bf16_t*>(l.x.ptr), static_cast<bf16_t*>(l.x_mid.ptr), HD};
    L.down = {bf16_boxes(l.h, n, F, F, kRows), bf16_boxes(l.wdown, C, F, F, kResidualN),
              static_cast<const bf16_t*>(l.x_mid.ptr), static_cast<bf16_t*>(l.x_next.ptr), F};
    L.ffn_norm = {static_cast<const bf16_t*>(l.x_mid.ptr), static_cast<const bf16_t*>(l.ffn_norm.ptr),
                  static_cast<bf16_t*>(l.xn2.ptr), l.rstd2.data<float>()};
    L.next_norm = {static_cast<const bf16_t*>(l.x_next.ptr), static_cast<const bf16_t*>(l.next_norm.ptr),
                   static_cast<bf16_t*>(l.xn_next.ptr), l.rstd_next.data<float>()};
    L.att = static_cast<bf16_t*>(l.att.ptr);
    L.lse = l.saved.data<float>();
  }
  op.sync = sync.data<int>();
  op.attn = a;
  op.scale_log2 = float(a.scale()) * kLog2e;
  op.eps = float(f.eps);
  op.layer_count = int(f.layers.size());
  op.row_blocks = int(n / kRows);
  op.c = C;
  op.tiles[kQkv] = Q / rope_tile::kN;
  op.tiles[kAttention] = a.H;
  op.tiles[kOutput] = C / kResidualN;
  op.tiles[kFfnNorm] = kRows / kNormRows;
  op.tiles[kGateUp] = F / kCols;
  op.tiles[kDown] = C / kResidualN;
  op.tiles[kNextNorm] = kRows / kNormRows;
  for (int t : op.tiles) op.per_layer += op.row_blocks * t;
  CUDA_CHECK(cudaFuncSetAttribute(block_forward_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  launch("block_forward_gemm_kernel", block_forward_gemm_kernel, sms, kThreads, kSmem, s, op);
}

}  // namespace tt::cuda

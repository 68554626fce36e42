// The transformer blocks' backward in one persistent launch (see block_backward.h for the contract).
//
// Why: at the default shape (8 x 128 tokens) a layer's backward is eight kernels of 3-20 us, each
// paying its start, its end and a partly empty GPU (docs/versions/v6.md). Here a block an SM takes
// tasks from a queue in global memory (task_queue.cuh), and each task is one block of a kernel v6
// runs one by one, its own device function: the same tiles, the same sums, the same bytes.
// Measured, it does not pay (opt-in, and the model does not run it): two layers' backward at the
// default shape took 0.229-0.231 ms in one launch against 0.141-0.143 for v6's kernels one by one on
// an H200 (docs/data/2026-11-30-h200-blocks-backward, where each task's times say why: a block an SM
// where the norm's kernel runs two, our 128-row tiles for products that cuBLAS makes in 128 tiles of
// 64 x 64, and every task's code in one kernel's 255 registers).
//
// The stages of a layer, from the last layer down, and their tasks (at the default shape):
//   SwiGLU     down's input gradient dh = d_out W_down, SwiGLU's backward in the epilogue:
//              dgateup (gated_product.cuh), a 128 x 128 tile of dh a task            n/128 F/128  (128)
//   gate/up    d_normed2 = dgateup W_gateup, a 128 x 64 tile (dx_tile, below)        n/128 C/64    (64)
//   FFN norm   d_mid = d_out + the norm's backward of d_normed2, and its gain's gradient:
//              a block of rmsnorm.cuh's one-kernel backward (a chunk of rows, or columns of dw)  (192)
//   output     datt = d_mid W_o, a 128 x 64 tile                                     n/128 HD/64   (64)
//   attention  dqkv, RoPE's backward inside: a query head of a sequence, the blocks of a kv
//              head's group a cluster (flash_tiles.cuh's backward_one_block)          B H          (64)
//   QKV        d_normed1 = dqkv W_qkv, a 128 x 64 tile                               n/128 C/64    (64)
//   attn norm  d_in = d_mid + the norm's backward of d_normed1, and its gain's gradient      (192)
//   dW         the four weight gradients, a 128 x 128 tile of one (weight_gradients.cuh)     (240)
// The input gradients' products are cuBLAS's in v6 one by one: here our tiles of 128 x 64, which
// sum along K chunk by chunk in cuBLAS's order, as gated_product.cuh's tile does (the bits are the
// same: the op case's extra checks).
//
// A stage's tasks wait until the stage before it has finished (a counter a stage and layer): every
// task is a block of a whole kernel, so it waits as the kernel would, for everything before it on
// the stream. The weight gradients wait for the attention's stage, the last whose output they read.
// Every tensor the launch writes is written once (the layers' gradients are tensors of their own),
// so no task waits for a reader. The attention's backward adds a kv head's query heads through
// distributed shared memory: the launch is in clusters of the group's size, whose blocks take their
// tasks together (run_cluster_tasks), each stage padded to whole clusters.
#include "ops/block_backward.h"

#include <algorithm>

#include "ops/flash_tiles.cuh"
#include "ops/gated_product.cuh"
#include "ops/rmsnorm.cuh"
#include "ops/task_queue.cuh"
#include "ops/weight_gradients.cuh"

namespace tt::cuda {
namespace {

using namespace tile;
using queue::count_done;
using queue::wait_for;

constexpr int kMaxLayers = 8, kMaxTokens = 1024, kMaxHidden = 1024, kProducts = 4;
enum Stage { kSwiglu, kGateUp, kFfnNorm, kOutput, kAttention, kQkv, kAttnNorm, kWeightGradients, kStageCount };
constexpr int kWG = 2;  // the attention's warpgroups: sequences of 128 tokens
constexpr int kNormVec = 8;
using DwTile = dw_tile::Tile<1>;  // the height changes no sum (weight_gradients.cu)

// dx = dy W: a tile of 128 rows and kN columns of dx, W [K, N] MN-major (boxes of 64 columns by 64
// rows, read transposed by wgmma), as gated_product.cuh's backward tile without its epilogue.
struct DxOp {
  CUtensorMap dy, w;  // dy [n, K] in boxes of 64 columns by 128 rows
  bf16_t* dx;         // [n, N]
  int k, n;
};
template <int kN, class Wait>
__device__ __forceinline__ void dx_tile(const DxOp& op, unsigned char* smem, uint32_t bars, int m0, int c0, Wait&& wait) {
  float acc[1][kN / 2];
  tile_sums<1, 1, kN>(
      acc, smem, bars, op.k / kChunk, wait,
      [&](int c, uint32_t st, uint32_t bar) {
        mbar_expect(bar, kABytes + kN * 128);
        for (int b = 0; b < kN / 64; ++b) tma_load_2d(st + kABytes + b * 64 * 128, &op.w, c0 + 64 * b, c * kChunk, bar);
      },
      [&](int c, uint32_t st, uint32_t bar) { tma_load_2d(st, &op.dy, c * kChunk, m0, bar); });
  constexpr int kPitch = kN * 2 + 16;  // a staged row
  const Fragment fr;
#pragma unroll
  for (int n = 0; n < kN / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = 4 * n + 2 * r;
      *fr.staged(smem, kPitch, fr.row0 + 8 * r, n) = __floats2bfloat162_rn(acc[0][i], acc[0][i + 1]);
    }
  write_staged<1, kN>(smem, [&](int r, int) { return op.dx + int64_t(m0 + r) * op.n + c0; });
}
// The input gradients' tiles: 64 columns, 64 tiles a product of C = 512 columns at the default shape
// (two layers' backward 0.2294-0.2310 ms on an H200, against 0.2344-0.2348 with 128 columns, the
// same bits; docs/data/2026-11-30-h200-blocks-backward).
constexpr int kDxCols = 64;

// The norm's backward with the residual gradient added, as rmsnorm.cu launches it at up to
// kDwColumnRows rows: blocks of rows, then blocks of the gain's columns.
struct NormOp {
  bf16_t* d_sum;        // the residual gradient out: d_in + the norm's input gradient
  const bf16_t* d_in;   // the residual gradient in
  float* dw;            // the gain's gradient
  const bf16_t *dout, *x, *w;
  const float* rstd;
};
struct Layer {
  gated_tile::Backward swiglu;
  DxOp gate_up, output, qkv;
  NormOp ffn_norm, attn_norm;
  bf16_t* dqkv;
  const bf16_t *datt, *att, *qkv_in;
  const float* lse;
  dw_tile::Product dw[kProducts];
};
struct Op {
  Layer layers[kMaxLayers];  // from the last layer down
  int* sync;
  const float* rope;
  AttnShape attn;
  float scale, scale_log2;
  int layer_count, n, c, rows_per_chunk, chunks;
  bool add;
  int tasks[kStageCount];   // a layer's tasks of each stage
  int padded[kStageCount];  // the same, padded to whole clusters
  int per_layer;
};

constexpr int kBuffersBytes =
    std::max({gated_tile::kBackwardBytes, kStages * (kABytes + kBPartBytes), DwTile::kStages * DwTile::kStageBytes,
              int(flash::OneBlock<kWG>::kSmem) - kSmemAlign});
constexpr int kBarriers = 8;
static_assert(kBarriers >= kStages + 1 && kBarriers >= DwTile::kStages, "the barriers a tile takes");
constexpr int kSmem = kBuffersBytes + 8 * kBarriers + 16 + kSmemAlign;  // then the two task slots

__device__ __forceinline__ int* counter(const Op& op, int layer, int stage) {
  return op.sync + queue::kHeader + layer * kStageCount + stage;
}

// Task j of a stage of layer l (0: the last layer), one of the stage's real tasks.
__device__ __forceinline__ void run_stage(const Op& op, int l, int stage, int j, unsigned char* smem, uint32_t bars) {
  const Layer& L = op.layers[l];
  auto wait_stage = [&](int layer, int s) { wait_for(counter(op, layer, s), op.padded[s]); };
  auto wait_before = [&] { wait_stage(l, stage - 1); };
  switch (stage) {
    case kSwiglu: {
      const int tiles_n = L.swiglu.f / kCols;
      gated_tile::down_swiglu_backward_tile(L.swiglu, smem, bars, j / tiles_n * kRows, j % tiles_n * kCols, [&] {
        if (l > 0) wait_stage(l - 1, kAttnNorm);  // the last layer's d_out: the kernel before
      });
      break;
    }
    case kGateUp:
    case kOutput:
    case kQkv: {
      const DxOp& d = stage == kGateUp ? L.gate_up : stage == kOutput ? L.output : L.qkv;
      const int tiles_n = d.n / kDxCols;
      dx_tile<kDxCols>(d, smem, bars, j / tiles_n * kRows, j % tiles_n * kDxCols, wait_before);
      break;
    }
    case kFfnNorm:
    case kAttnNorm: {
      const NormOp& nm = stage == kFfnNorm ? L.ffn_norm : L.attn_norm;
      wait_before();
      rmsnorm_fused_backward_block<bf16_t, kNormVec, false, true, false>(
          nm.d_sum, nm.d_in, nm.dw, nm.dout, nm.x, nm.w, nm.rstd, op.n, op.c, op.rows_per_chunk, op.chunks, op.add,
          Fp8Out{}, j, reinterpret_cast<float*>(smem));
      break;
    }
    case kAttention:
      wait_before();
      flash::backward_one_block<64, kWG, true, false>(j, L.dqkv, L.datt, L.att, L.qkv_in, op.rope, L.lse, op.attn,
                                                      op.scale, op.scale_log2);
      break;
    default:
      wait_stage(l, kAttention);
      dw_tile::weight_gradient_tile<1>(L.dw, kProducts, op.n, op.add, smem, bars, j);
  }
}

// A task past its stage's real ones (a cluster's padding) waits for nothing and only counts: the
// stage after waits for every task of it, so for every real one.
__device__ __forceinline__ void run_task(const Op& op, int task, unsigned char* smem, uint32_t bars) {
  const int l = task / op.per_layer;
  int j = task % op.per_layer, stage = 0;
  while (j >= op.padded[stage]) j -= op.padded[stage++];
  if (j < op.tasks[stage]) run_stage(op, l, stage, j, smem, bars);
  count_done(counter(op, l, stage));
}

// "gemm" in its name books it to the profile's products (trace.cpp, kernel_family): most of its
// time is theirs.
__global__ void __launch_bounds__(kThreads, 1) block_backward_gemm_kernel(Successor next, const __grid_constant__ Op op) {
  unsigned char* smem = aligned_smem();
  const uint32_t bars = smem_addr(smem + kBuffersBytes);
  int* slots = reinterpret_cast<int*>(smem + kBuffersBytes + 8 * kBarriers);
  await_previous_kernel(next);
  const int size = int(cooperative_groups::this_cluster().num_blocks());
  queue::run_cluster_tasks<kBarriers>(op.sync, op.per_layer * op.layer_count / size, op.layer_count * kStageCount,
                                      bars, slots, [&](int task) { run_task(op, task, smem, bars); });
}

int whole_clusters(int tasks, int group) { return (tasks + group - 1) / group * group; }

}  // namespace

std::string block_backward_misfit(const BlockBackward& b) {
  const AttnShape& a = b.attn;
  const int64_t n = b.tokens();
  const int C = b.hidden, F = b.intermediate, Q = int(a.ld()), HD = a.H * a.D;
  if (b.layers.empty() || b.layers.size() > size_t(kMaxLayers))
    return std::to_string(b.layers.size()) + " layers (1 to " + std::to_string(kMaxLayers) + ")";
  if (a.T != kRows) return "sequences of " + std::to_string(a.T) + " tokens, not " + std::to_string(kRows);
  if (n <= 0 || n > kMaxTokens) return std::to_string(n) + " tokens (1 to " + std::to_string(kMaxTokens) + ")";
  if (a.D != 64) return "head size " + std::to_string(a.D) + ", not 64";
  if (a.H / a.KVH > 8) return std::to_string(a.H / a.KVH) + " query heads a kv head, more than 8";
  // H D a multiple of 128 makes H even, so the QKV's (H + 2 KVH) D too: the weight gradients' tiles
  // of 128 rows cover QKV's gradient.
  if (C <= 0 || C % kCols || C > kMaxHidden || HD % kCols || F <= 0 || F % kCols)
    return "hidden " + std::to_string(C) + " or the attention's " + std::to_string(HD) + " (multiples of 128 up to " +
           std::to_string(kMaxHidden) + "), or FFN " + std::to_string(F) + " (of 128)";
  if (b.ropes.size() != 1) return "the queries and the keys rotated in two calls (without custom-rope)";
  const RopeShape& r = b.ropes[0];
  if (r.col != 0 || r.ld != Q || r.tokens != n || r.seq_len != a.T || r.head_dim != a.D || r.heads != a.H + a.KVH)
    return "RoPE not on the queries' and keys' heads from column 0";
  if (!tensors_of(DType::F32, {{&b.rope_table, int64_t(a.T) * a.D}})) return "no fp32 RoPE table";
  for (size_t i = 0; i < b.layers.size(); ++i) {
    const BlockBackwardLayer& l = b.layers[i];
    if (i + 1 < b.layers.size() && l.d_out.ptr != b.layers[i + 1].d_in.ptr)
      return "a layer's output gradient not the input gradient of the layer above";
    if (!tensors_of(DType::BF16, {{&l.x, n * C},         {&l.xn1, n * C},     {&l.qkv, n * Q},
                                  {&l.att, n * HD},      {&l.x_mid, n * C},   {&l.xn2, n * C},
                                  {&l.gateup, n * 2 * F}, {&l.h, n * F},       {&l.wqkv, int64_t(Q) * C},
                                  {&l.wo, int64_t(C) * HD}, {&l.wgateup, 2 * int64_t(F) * C},
                                  {&l.wdown, int64_t(C) * F}, {&l.attn_norm, C}, {&l.ffn_norm, C},
                                  {&l.d_out, n * C},     {&l.dgateup, n * 2 * F}, {&l.d_normed2, n * C},
                                  {&l.d_mid, n * C},     {&l.datt, n * HD},   {&l.dqkv, n * Q},
                                  {&l.d_normed1, n * C}, {&l.d_in, n * C}}))
      return "operands and gradients not bf16 of their sizes on 16-byte boundaries";
    if (!tensors_of(DType::F32, {{&l.saved, int64_t(a.B) * a.H * a.T},
                                 {&l.rstd1, n},
                                 {&l.rstd2, n},
                                 {&l.g_wqkv, int64_t(Q) * C},
                                 {&l.g_wo, int64_t(C) * HD},
                                 {&l.g_wgateup, 2 * int64_t(F) * C},
                                 {&l.g_wdown, int64_t(C) * F},
                                 {&l.g_attn_norm, C},
                                 {&l.g_ffn_norm, C}}))
      return "statistics and weight gradients not fp32 of their sizes (the attention's: the log-sum-exp of each row)";
  }
  return "";
}

void block_backward(const BlockBackward& b, const Tensor& sync, int sms, Stream s) {
  TT_CHECK(block_backward_misfit(b).empty(), "block_backward: " + block_backward_misfit(b));
  TT_CHECK(sync.dtype == DType::I32 && sync.numel >= kBlockBackwardSyncInts, "block_backward: the sync ints");
  static_assert(queue::kHeader + kMaxLayers * kStageCount <= kBlockBackwardSyncInts, "the counters fit");
  static_assert(sizeof(Op) <= 32764, "a kernel's parameters are at most 32 KB");
  const AttnShape& a = b.attn;
  const int n = int(b.tokens()), C = b.hidden, F = b.intermediate, Q = int(a.ld()), HD = a.H * a.D;
  const int group = a.H / a.KVH;
  auto dx_op = [&](const Tensor& dx, const Tensor& dy, const Tensor& w, int k, int cols) {
    return DxOp{bf16_boxes(dy, n, k, k, kRows), bf16_boxes(w, k, cols, cols, 64), static_cast<bf16_t*>(dx.ptr), k, cols};
  };
  auto norm_op = [&](const Tensor& d_sum, const Tensor& d_in, const Tensor& dw, const Tensor& dout, const Tensor& x,
                     const Tensor& w, const Tensor& rstd) {
    return NormOp{static_cast<bf16_t*>(d_sum.ptr), static_cast<const bf16_t*>(d_in.ptr), dw.data<float>(),
                  static_cast<const bf16_t*>(dout.ptr), static_cast<const bf16_t*>(x.ptr),
                  static_cast<const bf16_t*>(w.ptr), rstd.data<float>()};
  };
  Op op{};
  for (size_t i = 0; i < b.layers.size(); ++i) {
    const BlockBackwardLayer& l = b.layers[b.layers.size() - 1 - i];
    Layer& L = op.layers[i];
    L.swiglu = {bf16_boxes(l.d_out, n, C, C, kRows), bf16_boxes(l.wdown, C, F, F, 64),
                bf16_boxes(l.gateup, n, 2 * int64_t(F), 2 * int64_t(F), kRows), static_cast<bf16_t*>(l.dgateup.ptr),
                C, F};
    L.gate_up = dx_op(l.d_normed2, l.dgateup, l.wgateup, 2 * F, C);
    L.output = dx_op(l.datt, l.d_mid, l.wo, C, HD);
    L.qkv = dx_op(l.d_normed1, l.dqkv, l.wqkv, Q, C);
    L.ffn_norm = norm_op(l.d_mid, l.d_out, l.g_ffn_norm, l.d_normed2, l.x_mid, l.ffn_norm, l.rstd2);
    L.attn_norm = norm_op(l.d_in, l.d_mid, l.g_attn_norm, l.d_normed1, l.x, l.attn_norm, l.rstd1);
    L.dqkv = static_cast<bf16_t*>(l.dqkv.ptr);
    L.datt = static_cast<const bf16_t*>(l.datt.ptr);
    L.att = static_cast<const bf16_t*>(l.att.ptr);
    L.qkv_in = static_cast<const bf16_t*>(l.qkv.ptr);
    L.lse = l.saved.data<float>();
    // The weight gradients in the order the model groups them: down, gate/up, output, QKV.
    const struct {
      const Tensor &dw, &dout, &x;
      int out, in;
    } dws[kProducts] = {{l.g_wdown, l.d_out, l.h, C, F},
                        {l.g_wgateup, l.dgateup, l.xn2, 2 * F, C},
                        {l.g_wo, l.d_mid, l.att, C, HD},
                        {l.g_wqkv, l.dqkv, l.xn1, Q, C}};
    int tiles = 0;  // every layer's the same
    for (int p = 0; p < kProducts; ++p) {
      const auto& d = dws[p];
      L.dw[p] = {bf16_boxes(d.dout, n, d.out, d.out, 64), bf16_boxes(d.x, n, d.in, d.in, 64), d.dw.data<float>(), d.in,
                 d.in, tiles};
      tiles += (d.out / DwTile::kRows) * (d.in / kCols);
    }
    op.tasks[kWeightGradients] = tiles;
  }
  op.sync = sync.data<int>();
  op.rope = b.rope_table.data<float>();
  op.attn = a;
  op.scale = float(a.scale());
  op.scale_log2 = op.scale * kLog2e;
  op.layer_count = int(b.layers.size());
  op.n = n;
  op.c = C;
  op.chunks = norm_row_chunks(n, kNormThreads / 32);
  op.rows_per_chunk = (n + op.chunks - 1) / op.chunks;
  op.add = b.add;
  const int row_tiles = n / kRows, norm_blocks = op.chunks + C / kNormVec;
  op.tasks[kSwiglu] = row_tiles * (F / kCols);
  op.tasks[kGateUp] = op.tasks[kQkv] = row_tiles * (C / kDxCols);
  op.tasks[kFfnNorm] = op.tasks[kAttnNorm] = norm_blocks;
  op.tasks[kOutput] = row_tiles * (HD / kDxCols);
  op.tasks[kAttention] = a.B * a.H;
  for (int i = 0; i < kStageCount; ++i) op.per_layer += op.padded[i] = whole_clusters(op.tasks[i], group);
  CUDA_CHECK(cudaFuncSetAttribute(block_backward_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // As many clusters as fit at once: the queue needs none of the others, which would only start as
  // it ends.
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim = {unsigned(group), 1, 1};
  config.gridDim = dim3(unsigned(sms / group * group));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmem;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, block_backward_gemm_kernel, &config));
  TT_CHECK(clusters > 0, "block_backward: no cluster of " + std::to_string(group) + " blocks fits");
  launch_plainly_in("block_backward_gemm_kernel", block_backward_gemm_kernel,
                    unsigned(std::min(clusters, sms / group) * group), kThreads, kSmem, s, group, op);
}

}  // namespace tt::cuda

// The profiler's logic without a GPU: hotspot and region aggregation, the Chrome trace
// (valid JSON, ranges nested), CSV output, and the per-module FLOPs against the formula.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "model/llama.h"
#include "train/flops.h"
#include "trace/trace.h"
#include "train/report.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

// Two steps of three kernels and a memset: a and the memset inside forward/layer.0/attention,
// b inside forward/layer.0/ffn, c outside any range.
TraceData sample_trace() {
  TraceData t;
  t.regions = {"forward/layer.0/attention", "forward/layer.0/ffn"};
  t.steps = 2;
  uint64_t now = 1000;
  auto add = [&](TraceRecord::Kind kind, const char* name, uint64_t dur, int region, int step) {
    TraceRecord r;
    r.kind = kind, r.name = name, r.start_ns = now, r.end_ns = now + dur, r.region = region, r.step = step;
    now += dur + 500;
    t.records.push_back(r);
  };
  for (int step = 0; step < 2; ++step) {
    add(TraceRecord::Kernel, "a", 2000, 0, step);
    add(TraceRecord::Memset, "memset", 1000, 0, step);
    add(TraceRecord::Kernel, "b", 6000, 1, step);
    add(TraceRecord::Kernel, "c", 1000, -1, step);
  }
  return t;
}

TEST(Profile, HotspotsAggregateByName) {
  const std::vector<HotspotRow> rows = hotspots(sample_trace());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "b");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].total_us, 12.0);
  EXPECT_DOUBLE_EQ(rows[0].mean_us, 6.0);
  EXPECT_DOUBLE_EQ(rows[0].share, 12.0 / 20.0);
  double share = 0;
  for (const HotspotRow& r : rows) share += r.share;
  EXPECT_NEAR(share, 1.0, 1e-12);
}

TEST(Profile, RegionsAndSteps) {
  const TraceData t = sample_trace();
  const std::vector<RegionRow> rows = region_times(t);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].path, "forward/layer.0/attention");
  EXPECT_EQ(rows[0].kernels, 2);           // memsets are not kernel launches
  EXPECT_DOUBLE_EQ(rows[0].gpu_us, 6.0);   // 2 x (2 us kernel + 1 us memset)
  EXPECT_EQ(rows[2].path, "(outside any range)");
  EXPECT_EQ(launches_per_step(t), (std::vector<int64_t>{3, 3}));
  for (const StepAccount& a : step_accounts(t)) {
    EXPECT_DOUBLE_EQ(a.kernel_us, 10.0);
    EXPECT_DOUBLE_EQ(a.busy_us, 10.0);
  }
}

// An H100's SM: 2048 threads, 65536 registers, 32 blocks, 228 KB of shared memory, 1 KB kept per
// block; 132 of them.
const SmLimits kHopper{132, 2048, 65536, 32, 233472, 1024};

TraceRecord kernel_of(int blocks, int threads, int registers, int shared_bytes) {
  TraceRecord r;
  r.grid[0] = blocks, r.grid[1] = r.grid[2] = 1;
  r.block[0] = threads, r.block[1] = r.block[2] = 1;
  r.registers = registers, r.dynamic_smem = shared_bytes;
  return r;
}

// The blocks an SM holds are bound by its threads, registers or shared memory, whichever binds
// first, and the waves count how many times the kernel's blocks fill the GPU.
TEST(Profile, WavesCountTheBlocksAgainstWhatTheSmsHold) {
  EXPECT_EQ(resident_blocks(kernel_of(1, 256, 32, 0), kHopper), 8);        // threads: 2048 / 256
  EXPECT_EQ(resident_blocks(kernel_of(1, 256, 64, 0), kHopper), 4);        // registers: 65536 / (64 x 256)
  EXPECT_EQ(resident_blocks(kernel_of(1, 256, 33, 0), kHopper), 6);        // 33 a thread: 1280 a warp, 51 warps
  EXPECT_EQ(resident_blocks(kernel_of(1, 384, 168, 200000), kHopper), 1);  // cuBLAS-like: shared memory
  EXPECT_EQ(resident_blocks(kernel_of(1, 32, 16, 0), kHopper), 32);        // the blocks' own limit
  EXPECT_EQ(resident_blocks(kernel_of(1, 96, 40, 0), kHopper), 16);        // 12 warps in each of 4 partitions: 48 / 3
  EXPECT_EQ(resident_blocks(kernel_of(1, 128, 16, 45576), kHopper), 4);    // 46600 bytes with the runtime's, 46720 in 128s
  EXPECT_DOUBLE_EQ(waves(kernel_of(128, 384, 168, 200000), kHopper), 128.0 / 132);
  EXPECT_DOUBLE_EQ(waves(kernel_of(1584, 256, 32, 0), kHopper), 1.5);      // 1584 / (132 x 8)
}

// The kernel time of two steps by waves, and what the partial last waves leave idle: a kernel of
// half a wave leaves half its time; of 1.5 waves, a quarter (1.5 of 2 rounds); of 3, nothing.
TEST(Profile, WaveAccountSplitsTheTimeAndTheIdleSms) {
  TraceData t;
  t.steps = 2;
  uint64_t now = 0;
  for (int step = 0; step < 2; ++step)
    for (const TraceRecord& k : {kernel_of(66, 256, 32, 0), kernel_of(1584, 256, 32, 0), kernel_of(3168, 256, 32, 0)}) {
      TraceRecord r = k;
      r.name = "k", r.step = step, r.start_ns = now, r.end_ns = now + 8000, now += 10000;
      t.records.push_back(r);
    }
  TraceRecord copy;  // not a kernel: no waves
  copy.kind = TraceRecord::Memcpy, copy.name = "copy", copy.start_ns = now, copy.end_ns = now + 5000;
  t.records.push_back(copy);
  const WaveAccount w = wave_account(t, kHopper);
  EXPECT_DOUBLE_EQ(w.under_one_us, 8.0);  // 66 / (132 x 8) = 1/16 of a wave
  EXPECT_DOUBLE_EQ(w.one_to_two_us, 8.0);
  EXPECT_DOUBLE_EQ(w.two_or_more_us, 8.0);
  EXPECT_DOUBLE_EQ(w.partial_wave_idle_us, 8.0 * 15 / 16 + 8.0 / 4);
  const std::vector<HotspotRow> rows = hotspots(t, kHopper);  // one name: the mean of its calls' waves
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].waves, (1.0 / 16 + 1.5 + 3.0) / 3);
  EXPECT_DOUBLE_EQ(rows[1].waves, 0.0) << "a copy has none";
  EXPECT_DOUBLE_EQ(hotspots(t)[0].waves, 0.0) << "without the limits";
  std::ostringstream log;
  print_waves(log, t, kHopper);
  EXPECT_NE(log.str().find("under one wave 0.008 ms, one to two 0.008, two or more 0.008; what partial last waves leave "
                           "idle: 0.009 ms of the 0.024 (39.6%)"),
            std::string::npos)
      << log.str();
  std::ostringstream none;
  print_waves(none, t, SmLimits{});
  EXPECT_TRUE(none.str().empty());
}

// Under programmatic launch a kernel starts while the one before it runs and waits for it:
// only the part past the end of the work before it counts, so the per-kernel times add up to
// the busy time instead of counting the overlap twice.
TEST(Profile, OverlappingRecordsCountWhatTheyAdd) {
  TraceData t;
  t.regions = {"optimizer"};
  t.steps = 1;
  auto add = [&](const char* name, uint64_t start_ns, uint64_t end_ns) {
    TraceRecord r;
    r.name = name, r.start_ns = start_ns, r.end_ns = end_ns, r.region = 0;
    t.records.push_back(r);
  };
  add("b", 3000, 6000);  // listed first, starts second: inside a, adds 1 us
  add("a", 1000, 5000);  // 4 us
  add("c", 3500, 5500);  // inside a and b: adds nothing
  add("d", 8000, 9000);  // after an idle gap: 1 us
  EXPECT_EQ(added_us(t), (std::vector<double>{1.0, 4.0, 0.0, 1.0}));
  EXPECT_DOUBLE_EQ(step_accounts(t)[0].kernel_us, 6.0);
  EXPECT_DOUBLE_EQ(step_accounts(t)[0].busy_us, 6.0);
  EXPECT_DOUBLE_EQ(region_times(t)[0].gpu_us, 6.0);
  const std::vector<HotspotRow> rows = hotspots(t);
  EXPECT_EQ(rows[0].name, "a");
  EXPECT_DOUBLE_EQ(rows[0].share, 4.0 / 6.0);
}

// Streams run side by side (AdamW's beside the backward): each record keeps the time it adds to
// its own stream, and a step's account adds up to its window. Stream 1: a [0, 4] and b [5, 9] us;
// stream 2, the optimizer: adam [2, 7] and x [9.5, 10]. Something runs for 9.5 of the 10 us;
// the kernels' own times are 13.5 us, 4 of them side by side; the optimizer runs alone in [4, 5]
// and [9.5, 10].
TEST(Profile, OtherStreamsKeepTheirTimeAndTheStepAddsUp) {
  TraceData t;
  t.steps = 1;
  t.regions = {"backward/layer.0/ffn", "optimizer"};
  auto add = [&](const char* name, uint64_t start_ns, uint64_t end_ns, uint32_t stream, int region) {
    TraceRecord r;
    r.name = name, r.start_ns = start_ns, r.end_ns = end_ns, r.stream = stream, r.region = region;
    t.records.push_back(r);
  };
  add("a", 0, 4000, 1, 0);
  add("adam", 2000, 7000, 2, 1);
  add("b", 5000, 9000, 1, 0);
  add("x", 9500, 10000, 2, 1);
  EXPECT_EQ(added_us(t), (std::vector<double>{4.0, 5.0, 4.0, 0.5}));
  const std::vector<StepAccount> a = step_accounts(t);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_DOUBLE_EQ(a[0].window_us, 10.0);
  EXPECT_DOUBLE_EQ(a[0].busy_us, 9.5);
  EXPECT_DOUBLE_EQ(a[0].idle_us, 0.5);
  EXPECT_DOUBLE_EQ(a[0].kernel_us, 13.5);
  EXPECT_DOUBLE_EQ(a[0].concurrent_us, 4.0);
  EXPECT_DOUBLE_EQ(a[0].optimizer_alone_us, 1.5);
  EXPECT_DOUBLE_EQ(hotspots(t)[0].total_us, 5.0) << "adam keeps its whole time";
}

// An update behind the backward runs inside its layer's range ("backward/layer.0/optimizer"): the
// optimizer still, wherever its range sits, and a range merely named like it is not. Stream 1: the
// layer's last kernel [0, 4] us, the embedding's backward [6, 7]; stream 2: the layer's AdamW
// [3, 9]. The optimizer runs alone in [4, 6] and [7, 9].
TEST(Profile, AnUpdateBehindTheBackwardIsTheOptimizerToo) {
  TraceData t;
  t.steps = 1;
  t.regions = {"backward/layer.0/attention_norm", "backward/layer.0/optimizer", "backward/optimizers_note"};
  auto add = [&](uint64_t start_ns, uint64_t end_ns, uint32_t stream, int region) {
    TraceRecord r;
    r.name = "k", r.start_ns = start_ns, r.end_ns = end_ns, r.stream = stream, r.region = region;
    t.records.push_back(r);
  };
  add(0, 4000, 1, 0);
  add(3000, 9000, 2, 1);
  add(6000, 7000, 1, 2);
  const std::vector<StepAccount> a = step_accounts(t);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_DOUBLE_EQ(a[0].window_us, 9.0);
  EXPECT_DOUBLE_EQ(a[0].optimizer_alone_us, 4.0);
}

// scripts/profile/tail.py on a trace as the profiler writes it: the step's last kernels, and how
// long it runs after its last kernel outside the optimizer. The layer's last kernel [0, 10] us,
// its update [8, 14] (a range of the backward's), the loss's copy [30, 32] (left out, as the
// accounts leave copies).
TEST(Profile, TailScriptSaysWhatTheStepWaitsForAtItsEnd) {
  TraceData t;
  t.steps = 1;
  t.regions = {"backward/layer.0/attention", "backward/layer.0/optimizer", "loss_readback"};
  auto add = [&](const char* name, uint64_t start_ns, uint64_t end_ns, int region, TraceRecord::Kind kind) {
    TraceRecord r;
    r.name = name, r.start_ns = start_ns, r.end_ns = end_ns, r.stream = 1, r.region = region, r.kind = kind;
    t.records.push_back(r);
  };
  add("last_kernel", 0, 10000, 0, TraceRecord::Kernel);
  add("adamw_kernel", 8000, 14000, 1, TraceRecord::Kernel);
  add("memcpy DtoH", 30000, 32000, 2, TraceRecord::Memcpy);
  const ScratchDir dir("tail");
  std::ofstream(dir.path() / "trace.json") << [&] {
    std::ostringstream out;
    write_chrome_trace(out, t);
    return out.str();
  }();
  const std::string command = "python3 " + std::string(TT_SOURCE_DIR) + "/scripts/profile/tail.py " +
                              (dir.path() / "trace.json").string() + " > " + (dir.path() / "out").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text(dir.path() / "out");
  const std::string out = read_text(dir.path() / "out");
  EXPECT_NE(out.find("step 0: 14.0 us from its first kernel to its last"), std::string::npos) << out;
  EXPECT_NE(out.find("-14.0     -4.0  backward/layer.0/attention"), std::string::npos) << out;
  EXPECT_NE(out.find("the step runs 4.0 us after its last kernel outside the optimizer"), std::string::npos) << out;
  EXPECT_EQ(out.find("memcpy"), std::string::npos) << out;
}

// scripts/profile/chain.py on a trace as the profiler writes it: each pass's own chain by kernel,
// the kernels beside it, and the backward's waits. The forward's two kernels overlap ([0, 10] and
// [8, 20] us: 10 + 10); the backward's [30, 40] and [45, 50] wait 5 us between them, beside a
// weight-gradient kernel (--beside weight_gradients) and AdamW (the optimizer's, always beside).
TEST(Profile, ChainScriptAddsUpEachPassAndItsWaits) {
  TraceData t;
  t.steps = 1;
  t.regions = {"forward/layer.0/attention", "forward/layer.0/ffn", "backward/layer.0/ffn",
               "backward/layer.0/weight_gradients", "backward/layer.0/optimizer", "backward/layer.0/attention"};
  auto add = [&](const char* name, uint64_t start_us, uint64_t end_us, int region) {
    TraceRecord r;
    r.name = name, r.start_ns = start_us * 1000, r.end_ns = end_us * 1000, r.stream = 1, r.region = region;
    r.kind = TraceRecord::Kernel;
    t.records.push_back(r);
  };
  add("qkv_kernel", 0, 10, 0);
  add("ffn_kernel<8>", 8, 20, 1);
  add("ffn_backward_kernel", 30, 40, 2);
  add("grouped_gemm_dw_kernel", 38, 60, 3);
  add("adamw_kernel", 40, 70, 4);
  add("attention_backward_kernel", 45, 50, 5);
  const ScratchDir dir("chain");
  std::ofstream(dir.path() / "trace.json") << [&] {
    std::ostringstream out;
    write_chrome_trace(out, t);
    return out.str();
  }();
  const std::string command = "python3 " + std::string(TT_SOURCE_DIR) + "/scripts/profile/chain.py " +
                              (dir.path() / "trace.json").string() + " --beside weight_gradients --gaps 2 > " +
                              (dir.path() / "out").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text(dir.path() / "out");
  const std::string out = read_text(dir.path() / "out");
  for (const char* line : {"forward: 20.0 us of kernels in a chain of 20.0 us a step",
                           "     10.0 us    1.0 calls  ffn_kernel\n",
                           "backward: 15.0 us of kernels in a chain of 20.0 us a step",
                           "     10.0 us    1.0 calls  ffn_backward_kernel",
                           "      5.0 us    1.0 calls  attention_backward_kernel",
                           "  beside:    30.0 us    1.0 calls  adamw_kernel",
                           "  beside:    22.0 us    1.0 calls  grouped_gemm_dw_kernel",
                           "     5.0 us after ffn_backward_kernel (backward/layer.0/ffn) before attention_backward_kernel "
                           "(backward/layer.0/attention)",
                           "  5.0 us in all"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
}

// A module faster than the hardware is an error of the profile, said in a line: attention at
// 1,500 TFLOP/s is above bf16's 989.4 but not FP8's 1,978.9.
TEST(Profile, AModuleAboveItsCeilingIsAnError) {
  std::vector<ModuleFlops> modules = {{"attention", 0, 1.5e12, 0, 1000, 0}, {"head_loss", 0, 1e9, 0, 100, 0}};
  std::ostringstream bf16, fp8;
  EXPECT_FALSE(print_flops_profile(bf16, modules, 2.0, 989.4e12, "bf16", 989.4e12));
  EXPECT_NE(bf16.str().find("error in the profile: attention forward at 1500.0 TFLOP/s is above its ceiling of 989.4"),
            std::string::npos) << bf16.str();
  EXPECT_TRUE(print_flops_profile(fp8, modules, 2.0, 989.4e12, "bf16", 1978.9e12));
  EXPECT_EQ(fp8.str().find("error"), std::string::npos) << fp8.str();
}

// Kernels group into families by name, and the family table books the step's work where it runs:
// with FP8 products and a fused attention, the layers' FLOPs to the FP8 products, the head's to
// the other products, attention's own to attention; a family faster than its ceiling is an error.
TEST(Profile, FamiliesBookTheWorkWhereItRuns) {
  for (const auto& [name, family] : std::vector<std::pair<const char*, const char*>>{
           {"nvjet_sm90_qqtst_128x256_128x4_2x1_v_bz_coopA_TNN", "FP8 products"},
           {"nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "products"},
           {"flash_backward_dq_kernel<64, 2>", "attention"},
           {"causal_softmax_kernel<__nv_bfloat16, 8>", "attention"},
           {"quantize_kernel<SwiGluOutput<__nv_bfloat16>, true, true>", "SwiGLU"},
           {"quantize_kernel<StoredMatrix<__nv_bfloat16>, true, true>", "quantizing passes"},
           {"amax_partials_kernel<StoredMatrix<__nv_bfloat16>>", "quantizing passes"},
           {"amax_partials_kernel<SwiGluOutput<__nv_bfloat16>>", "SwiGLU"},
           {"quantize_kernel<RopeGradient<__nv_bfloat16>, true, true>", "RoPE"},
           {"quantize_kernel<SoftmaxGradient<__nv_bfloat16>, true, true>", "cross-entropy"},
           {"rms_dw_sum_kernel", "RMSNorm"},
           {"adamw_kernel<__nv_bfloat16>", "AdamW"},
           {"memset", "copies and fills"},
           {"embedding_forward_kernel<__nv_bfloat16>", "other"}})
    EXPECT_EQ(kernel_family(name), family) << name;

  TraceData t;
  t.steps = 1;
  uint64_t now = 0;
  auto add = [&](const char* name, uint64_t us) {
    TraceRecord r;
    r.name = name, r.start_ns = now, r.end_ns = now + us * 1000;
    now = r.end_ns;
    t.records.push_back(r);
  };
  add("nvjet_sm90_qqtst_a", 1000);  // 1 ms
  add("nvjet_sm90_qqtst_b", 1000);  // 1 ms
  add("nvjet_sm90_tst_head", 1000);
  add("flash_forward_kernel<64, 2>", 500);
  add("adamw_kernel<float>", 500);
  const std::vector<FamilyRow> rows = kernel_families(t);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].family, "FP8 products");
  EXPECT_DOUBLE_EQ(rows[0].total_us, 2000.0);
  EXPECT_TRUE(has_fused_attention(t));
  StepWork work{2e12, 0.5e12, 0.05e12};  // layers 1,000 TFLOP/s over 2 ms; head 500; attention 100
  work.bytes["AdamW"] = 1e9;                // 2,000 GB/s over 0.5 ms
  Ceilings datasheet;                       // nothing measured
  datasheet.peak = 989.4e12, datasheet.fp8_peak = 1978.9e12, datasheet.precision = "bf16";
  std::ostringstream ok, over;
  EXPECT_TRUE(print_families(ok, t, work, datasheet, 4.1));
  EXPECT_NE(ok.str().find("  FP8 products          2.000   50.0%   2.000 TF   1000.0 TF/s  50.5% of fp8's peak 1978.9"),
            std::string::npos)
      << ok.str();
  EXPECT_NE(ok.str().find("  products              1.000   25.0%   0.500 TF    500.0 TF/s  50.5% of bf16's peak 989.4"),
            std::string::npos)
      << ok.str();
  EXPECT_NE(ok.str().find("  AdamW                 0.500   12.5%   1.000 GB   2000.0 GB/s\n"), std::string::npos) << ok.str();
  // The rows (4 ms) back to back on one stream, in a step its events measured at 4.1 ms.
  EXPECT_NE(ok.str().find("  the rows 4.000 - memory copies 0.000 - side by side 0.000 + idle 0.000 + outside the kernels "
                          "0.100 = 4.100 ms"),
            std::string::npos)
      << ok.str();
  // A copy between host and GPU is a row's time but stands outside the step's account (the host
  // paces it): the line takes it out again, and the rest is what the kernels' span tells.
  TraceData with_copy = t;
  TraceRecord upload;
  upload.kind = TraceRecord::Memcpy, upload.name = "memcpy HtoD", upload.bytes = 4096;
  upload.start_ns = now + 200'000, upload.end_ns = now + 300'000;  // 0.1 ms, after a 0.2 ms gap
  with_copy.records.push_back(upload);
  std::ostringstream copy_line;
  EXPECT_TRUE(print_families(copy_line, with_copy, work, datasheet, 4.1));
  EXPECT_NE(copy_line.str().find("  the rows 4.100 - memory copies 0.100 - side by side 0.000 + idle 0.000 + outside the "
                                 "kernels 0.100 = 4.100 ms"),
            std::string::npos)
      << copy_line.str();
  StepWork too_much = work;
  too_much.layer_products = 5e12;
  EXPECT_FALSE(print_families(over, t, too_much, datasheet, 0));
  EXPECT_NE(over.str().find("error in the profile: FP8 products at 2500.0 TFLOP/s is above the fp8 peak"), std::string::npos)
      << over.str();
  // Measured ceilings: the rates against them too; bytes above an HBM copy's rate are L2's in part,
  // above an L2-resident copy's an error.
  Ceilings measured = datasheet;
  measured.gemm = 700e12, measured.fp8_gemm = 1250e12, measured.hbm_copy = 3000e9, measured.l2_copy = 8000e9;
  std::ostringstream against;
  EXPECT_TRUE(print_families(against, t, work, measured, 0));
  EXPECT_NE(against.str().find("1000.0 TF/s  80.0% of the measured fp8 product's 1250.0, 50.5% of fp8's peak 1978.9"),
            std::string::npos)
      << against.str();
  EXPECT_NE(against.str().find("2000.0 GB/s  66.7% of an HBM copy's 3000.0\n"), std::string::npos) << against.str();
  EXPECT_NE(against.str().find("  measured: a bf16 product 700.0 TFLOP/s, an FP8 product 1250.0, an HBM copy 3000.0 GB/s, "
                               "an L2-resident copy 8000.0\n"),
            std::string::npos)
      << against.str();
  StepWork in_l2 = work, impossible = work;
  in_l2.bytes["AdamW"] = 2e9, impossible.bytes["AdamW"] = 5e9;
  std::ostringstream l2, wrong;
  EXPECT_TRUE(print_families(l2, t, in_l2, measured, 0));
  EXPECT_NE(l2.str().find("4000.0 GB/s  133.3% of an HBM copy's 3000.0 (its data in L2 in part: an L2 copy 8000.0)"),
            std::string::npos)
      << l2.str();
  EXPECT_FALSE(print_families(wrong, t, impossible, measured, 0));
  EXPECT_NE(wrong.str().find("error in the profile: AdamW at 10000.0 GB/s is above an L2-resident copy's 8000.0"),
            std::string::npos)
      << wrong.str();
  // With the head in FP8 its work joins the FP8 family's: 2.5 TFLOP over 2 ms there.
  std::ostringstream head;
  StepWork head_fp8 = work;
  head_fp8.head_fp8 = true;
  EXPECT_TRUE(print_families(head, t, head_fp8, datasheet, 0));
  EXPECT_NE(head.str().find("  FP8 products          2.000   50.0%   2.500 TF   1250.0 TF/s  63.2% of fp8's peak 1978.9"),
            std::string::npos)
      << head.str();
  const StepWork sums = step_work(ModelConfig{}, 8, 128);
  EXPECT_NEAR(sums.layer_products + sums.head_products + sums.attention, training_flops(ModelConfig{}, 8, 128),
              1e-9 * training_flops(ModelConfig{}, 8, 128));
}

TEST(Profile, ChromeTraceIsValidJsonWithNestedRanges) {
  std::ostringstream out;
  write_chrome_trace(out, sample_trace());
  const nlohmann::json j = nlohmann::json::parse(out.str());
  int kernels = 0;
  std::map<std::pair<int, std::string>, std::pair<double, double>> ranges;  // (step, path) -> [ts, ts + dur]
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("cat") == "region")
      ranges[{e["args"]["step"].get<int>(), e["args"]["path"].get<std::string>()}] = {
          e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()};
    else
      kernels++;
  }
  EXPECT_EQ(kernels, 8);
  for (int step = 0; step < 2; ++step) {
    const auto fwd = ranges.at({step, "forward"}), layer = ranges.at({step, "forward/layer.0"});
    const auto att = ranges.at({step, "forward/layer.0/attention"}), ffn = ranges.at({step, "forward/layer.0/ffn"});
    for (auto child : {att, ffn}) {  // children inside the parent, the parent inside its own parent
      EXPECT_GE(child.first, layer.first);
      EXPECT_LE(child.second, layer.second);
    }
    EXPECT_GE(layer.first, fwd.first);
    EXPECT_LE(layer.second, fwd.second);
    EXPECT_LE(att.second, ffn.first);  // siblings do not overlap
  }
}

TEST(Profile, CsvFiles) {
  std::ostringstream k, r;
  write_kernels_csv(k, hotspots(sample_trace()));
  write_regions_csv(r, region_times(sample_trace()));
  EXPECT_EQ(k.str().substr(0, k.str().find('\n')), "kernel,calls,total_us,mean_us,min_us,max_us,share");
  EXPECT_NE(k.str().find("\nb,2,12.000,6.000,6.000,6.000,0.60000\n"), std::string::npos) << k.str();
  EXPECT_NE(r.str().find("forward/layer.0/ffn,2,12.000,0.60000"), std::string::npos) << r.str();
}

TEST(Profile, ShortKernelNames) {
  EXPECT_EQ(short_kernel_name("void tt::cuda::(anonymous namespace)::rms_kernel<float>(float*, float const*, long)"),
            "rms_kernel<float>");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n"), "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n");
}

// The memory-bound families' bytes: every tensor once, read or written, as version 1 takes and
// makes them in fp32 (q and k rotated in two calls, the loss's forward reading the logits once
// more than its backward does), and AdamW over every parameter.
TEST(Profile, FamilyBytesCountEachTensorOnce) {
  ModelConfig c;
  c.vocab_size = 96, c.hidden = 64, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.intermediate = 96;
  auto be = make_cpu_backend(plan_for_version(1));
  Llama m(c, *be, 2, 16);
  const std::map<std::string, double> bytes = m.family_bytes();
  const double N = 32, C = 64, L = 2, F = 96, D = 16, a = 4;
  EXPECT_DOUBLE_EQ(bytes.at("RMSNorm"), (2 * L + 1) * 5 * a * N * C);
  EXPECT_DOUBLE_EQ(bytes.at("RoPE"), L * 4 * a * N * (4 + 2) * D);
  EXPECT_DOUBLE_EQ(bytes.at("SwiGLU"), L * 8 * a * N * F);
  EXPECT_DOUBLE_EQ(bytes.at("cross-entropy"), 3 * a * N * m.padded_vocab() + 8 * N);
  EXPECT_DOUBLE_EQ(bytes.at("AdamW"), 28.0 * double(m.adam_m().numel));
  EXPECT_GE(m.adam_m().numel, c.param_count());
  EXPECT_EQ(bytes.count("quantizing passes"), 0u);  // no FP8
}

TEST(Profile, ModuleFlopsAddUpToTheFormula) {
  ModelConfig c;
  for (int T : {1, 128, 4096}) {
    double total = 0;
    int64_t params = 0;
    for (const ModuleFlops& m : module_flops(c, 8, T)) {
      total += m.forward_flops + m.backward_flops;
      params += m.params;
      EXPECT_DOUBLE_EQ(m.backward_flops, 2 * m.forward_flops) << m.module;
    }
    EXPECT_NEAR(total, training_flops(c, 8, T), 1e-9 * total);
    EXPECT_EQ(params, c.param_count());
  }
}

TEST(Profile, MeasuredTimesJoinModulesByRangeName) {
  std::vector<ModuleFlops> m = module_flops(ModelConfig{}, 8, 128);
  TraceData t = sample_trace();
  t.regions[1] = "backward/layer.0/ffn";
  add_measured_times(m, t);
  for (const ModuleFlops& x : m) {
    if (x.module == "attention") EXPECT_DOUBLE_EQ(x.forward_us, 3.0);  // mean over the 2 steps
    if (x.module == "ffn") EXPECT_DOUBLE_EQ(x.backward_us, 6.0);
  }
}

// grouped-weight-gradients: a layer's weight gradients in one launch, in a weight_gradients range
// of their own, booked to attention and ffn in proportion to their weight gradients' FLOPs.
TEST(Profile, GroupedWeightGradientsAreSharedByTheirModules) {
  const ModelConfig c;
  std::vector<ModuleFlops> m = module_flops(c, 8, 128);
  TraceData t = sample_trace();
  t.regions[1] = "backward/layer.0/weight_gradients";
  add_measured_times(m, t);
  const double N = 8 * 128, C = c.hidden, F = c.intermediate, HD = double(c.heads) * c.head_dim();
  const double attention = c.layers * 2 * N * (C * c.qkv_dim() + HD * C), ffn = c.layers * 2 * N * 3 * C * F;
  double booked = 0;
  for (const ModuleFlops& x : m) {
    booked += x.backward_us;
    if (x.module == "attention") EXPECT_NEAR(x.backward_us, 6.0 * attention / (attention + ffn), 1e-12);
    if (x.module == "ffn") EXPECT_NEAR(x.backward_us, 6.0 * ffn / (attention + ffn), 1e-12);
  }
  EXPECT_NEAR(booked, 6.0, 1e-12);  // the range's 6 us a step, all of it
}

// The fused classifier runs the head's backward inside the forward's head_loss range: its FLOPs
// are booked there, where the time is, and the total stays the formula's. Without it (a backward
// head_loss range) they stay apart.
TEST(Profile, TheFusedClassifiersBackwardIsBookedWhereItRuns) {
  for (const char* backward_range : {"", "backward/head_loss"}) {
    std::vector<ModuleFlops> m = module_flops(ModelConfig{}, 8, 128);
    double head_fwd = 0, head_bwd = 0;
    for (const ModuleFlops& x : m)
      if (x.module == "head_loss") head_fwd = x.forward_flops, head_bwd = x.backward_flops;
    TraceData t = sample_trace();
    t.regions[0] = "forward/head_loss";
    if (*backward_range) t.regions[1] = backward_range;
    add_measured_times(m, t);
    for (const ModuleFlops& x : m)
      if (x.module == "head_loss") {
        EXPECT_DOUBLE_EQ(x.forward_flops, *backward_range ? head_fwd : head_fwd + head_bwd) << backward_range;
        EXPECT_DOUBLE_EQ(x.backward_flops, *backward_range ? head_bwd : 0.0) << backward_range;
      }
  }
}

}  // namespace
}  // namespace tt::test

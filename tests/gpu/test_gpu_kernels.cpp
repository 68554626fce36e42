// The op table's check (src/bench/op_table.h, `tiny_llama kernels --check`): every operation
// `tiny_llama kernels` times, in each implementation (v1 to v5, fp32 and bf16), against the CPU
// reference in double from the same inputs: at the kernel benchmark's default shape (GPT-2's
// vocabulary) and at an awkward one (odd widths that take the scalar paths, a sequence of 129,
// head size 32, a small vocabulary; without v5, whose FP8 products take multiples of 16). v5's
// quantizing pass must give the CPU quantizer's bytes (error 0). Every output must be written whole (NaN before each call)
// and our kernels (v3, v4) must repeat their bits.
#include <sstream>

#include "bench/kernels.h"
#include "gpu_harness.h"

namespace tt::test {
namespace {

TEST(GpuKernelTable, EveryRowMatchesTheReference) {
  REQUIRE_GPU();
  for (const char* precision : {"fp32", "bf16"})
    for (bool awkward : {false, true}) {
      SCOPED_TRACE(testing::Message() << precision << (awkward ? " awkward shape" : " default shape"));
      KernelBenchOptions o;
      o.check = true, o.versions = {1, 2, 3, 4, 5}, o.precision = precision;
      if (awkward) {
        o.versions = {1, 2, 3, 4};
        o.batch = 3, o.seq_len = 129, o.hidden = 1000, o.heads = 4, o.kv_heads = 2, o.head_dim = 32;
        o.intermediate = 100, o.vocab = 1000;
      }
      std::ostringstream log;
      const std::vector<KernelRow> rows = run_kernel_bench(o, log);
      EXPECT_EQ(kernel_check_failures(rows), 0) << log.str();
      for (const KernelRow& r : rows)
        if (r.op == "quantize") EXPECT_EQ(r.error, 0.0) << r.direction;
      EXPECT_GE(rows.size(), 20u) << log.str();
      std::cout << log.str();
    }
}

}  // namespace
}  // namespace tt::test

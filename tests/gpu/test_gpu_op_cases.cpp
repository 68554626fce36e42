// The op cases (src/bench/op_case.h), each in every version that has a row of `tiny_llama kernels`
// and in fp32 and bf16: against the CPU reference in double as `kernels --check` runs them, at the
// kernel benchmark's default shape (GPT-2's vocabulary) and at an awkward one (odd widths that take
// the scalar paths, a sequence of 129, head size 32, a small vocabulary; not in v5, whose FP8
// products take multiples of 16), every output written whole (NaN before each call) and our
// kernels (v3 on) repeating their bits; then each case's extra checks (awkward shapes,
// accumulation, bits equal to another version's) from fresh random inputs. And `kernels --check`
// itself, its rows and their count.
#include <sstream>

#include "bench/kernels.h"
#include "bench/op_case.h"
#include "gpu_harness.h"

namespace tt::test {
namespace {

struct CaseVersion {
  std::string op;
  size_t index;  // in op_cases()
  int version;
  bool bf16;
};
void PrintTo(const CaseVersion& p, std::ostream* os) {
  *os << p.op << " v" << p.version << (p.bf16 ? " bf16" : " fp32");
}

std::vector<CaseVersion> every_case_version() {
  std::vector<CaseVersion> all;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    const std::unique_ptr<OpCase> op = op_cases()[i](OpShape{});
    for (int version : versions_from(1))
      if (op->has_version(version))
        for (bool bf16 : {false, true}) all.push_back({op->name(), i, version, bf16});
  }
  return all;
}

class GpuOpCase : public ::testing::TestWithParam<CaseVersion> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
};

TEST_P(GpuOpCase, MatchesTheReference) {
  const CaseVersion& p = GetParam();
  const OpMaker& make = op_cases()[p.index];
  OpShape awkward;
  awkward.B = 3, awkward.T = 129, awkward.hidden = 1000, awkward.heads = 4, awkward.kv_heads = 2, awkward.head_dim = 32;
  awkward.intermediate = 100, awkward.vocab = 1000;
  for (OpShape shape : {OpShape{}, awkward}) {
    if (p.version == 5 && shape.hidden == awkward.hidden) continue;
    shape.bf16_inputs = p.bf16;
    SCOPED_TRACE(shape.label());
    OpRig rig(make, shape, make_backend({DeviceKind::Cuda, op_plan(p.version, *make(shape), p.bf16)}), 42);
    for (const OpCheck& c : check_against_reference(rig))
      EXPECT_EQ(c.status, "ok") << c.direction << ": error " << c.error << ", bound " << c.bound;
  }
}

TEST_P(GpuOpCase, ExtraChecks) {
  const CaseVersion& p = GetParam();
  const uint64_t seed = uint64_t(::testing::UnitTest::GetInstance()->random_seed()) * 7919 + 17;
  OpCheckLog log(p.bf16, seed);
  op_cases()[p.index](OpShape{})->extra_checks(log, p.version);
  for (const std::string& failure : log.failures()) ADD_FAILURE() << failure << " (inputs from seed " << seed << ")";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuOpCase, ::testing::ValuesIn(every_case_version()), [](const auto& info) {
  return info.param.op + "_v" + std::to_string(info.param.version) + (info.param.bf16 ? "_bf16" : "_fp32");
});

// `kernels --check` at a small shape: a row per case, version and direction, each matching.
TEST(GpuKernelCheck, EveryRowMatches) {
  REQUIRE_GPU();
  for (const char* precision : {"fp32", "bf16"}) {
    KernelBenchOptions o;
    o.check = true, o.precision = precision, o.versions = versions_from(1);
    o.batch = 2, o.seq_len = 64, o.hidden = 128, o.heads = 4, o.kv_heads = 2, o.head_dim = 32, o.intermediate = 256;
    o.vocab = 5000;
    std::ostringstream log;
    const std::vector<KernelRow> rows = run_kernel_bench(o, log);
    EXPECT_EQ(kernel_check_failures(rows), 0) << log.str();
    // 33 case versions, each fwd and bwd but the cross-entropy's three rows and the QKV product's and
    // the blocks' forward's two each
    EXPECT_EQ(rows.size(), 59u) << log.str();
    std::cout << log.str();
  }
}

}  // namespace
}  // namespace tt::test

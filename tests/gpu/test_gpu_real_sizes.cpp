// Real model sizes on the GPU: the fused classifier at the vocabularies of the workshop, LLaMA
// and GPT-2 against the CPU reference in double; the vocabulary padding invisible (zero rows
// that stay zero, checkpoints of the real vocabulary that resume bit for bit); and the whole
// model at GPT-2 small's shape against the CPU.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpu_harness.h"
#include "run_outputs.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

// Loss and every parameter gradient of `c` on the GPU under `plan` against the CPU in double,
// on one synthetic batch of B x T tokens.
void expect_gradients_match(const ModelConfig& c, const Plan& plan, int B, int T, double loss_tol, double grad_tol) {
  auto cpu = make_cpu_backend_f64();
  auto gpu = make_backend({DeviceKind::Cuda, plan});
  Llama ref(c, *cpu, B, T), m(c, *gpu, B, T);
  ref.init_weights(11);
  m.init_weights(11);
  auto data = make_data_source("synthetic", c.vocab_size, B, T, 5);
  Batch b;
  data->next_batch(b);
  for (Llama* x : {&ref, &m}) x->set_batch(b.tokens.data(), b.targets.data());
  ref.forward();
  m.write(m.grads(), std::vector<float>(size_t(m.grads().numel), std::nanf("")));  // every gradient written
  m.forward();  // with the fused classifier this already runs the head's backward
  const double loss_ref = ref.mean_loss(), loss = m.mean_loss();
  EXPECT_LT(std::fabs(loss - loss_ref) / loss_ref, loss_tol) << loss << " vs " << loss_ref;
  ref.backward();
  m.backward();
  const std::vector<double> g_ref = ref.read(ref.grads()), g = m.read(m.grads());
  for (const ParamEntry& e : param_table(c)) {
    const std::vector<double> a(g.begin() + e.offset, g.begin() + e.offset + e.numel);
    const std::vector<double> r(g_ref.begin() + e.offset, g_ref.begin() + e.offset + e.numel);
    ASSERT_TRUE(all_finite(a)) << e.name;
    EXPECT_LT(rel_error(a, r), grad_tol) << e.name;
  }
}

struct ClassifierCase {
  int vocab, batch, seq;  // rows = batch x seq
};

class FusedClassifier : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
};

// One layer of hidden 64 (two heads of 32), so that the head dominates. The gradient of the
// final norm's weight is the gradient of the hidden states entering the head, summed; those of
// the layer's weights follow from it; the embedding's holds the head's weight gradient plus
// the embedding backward. Rows 129 run in chunks of 50, 50 and 29, the others in one.
TEST_P(FusedClassifier, MatchesTheCpuAtEveryVocabularyAndRowCount) {
  const bool bf16 = GetParam() == DType::BF16;
  for (int vocab : {7, 1000, 32000, 50257})
    for (const ClassifierCase& k : {ClassifierCase{vocab, 1, 1}, {vocab, 1, 7}, {vocab, 3, 43}, {vocab, 4, 1024}}) {
      SCOPED_TRACE(testing::Message() << "vocab " << k.vocab << ", rows " << k.batch * k.seq);
      ModelConfig c;
      c.vocab_size = k.vocab, c.hidden = 64, c.layers = 1, c.heads = 2, c.kv_heads = 1, c.intermediate = 128;
      Plan p = plan_for_version(1);
      p.fused_classifier = true;
      p.amp = bf16;
      p.classifier_chunk = k.batch * k.seq == 129 ? 50 : 0;
      expect_gradients_match(c, p, k.batch, k.seq, bf16 ? 2e-2 : 1e-5, bf16 ? 2e-2 : 1e-4);
    }
}

INSTANTIATE_TEST_SUITE_P(Types, FusedClassifier, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });


TrainOptions gpt2_vocab_options(int version) {
  TrainOptions o;
  o.model.vocab_size = 50257, o.model.hidden = 64, o.model.layers = 2, o.model.heads = 2, o.model.kv_heads = 1;
  o.model.intermediate = 128;
  o.batch = 2, o.seq_len = 64, o.timing_warmup = 1, o.log_every = 100;
  o.backend.device = DeviceKind::Cuda;
  o.backend.plan = plan_for_version(version);
  o.backend.plan.amp = true;
  return o;
}

bool all_zero_bytes(Backend& be, const Tensor& t) {
  std::vector<char> host(t.bytes());
  be.download(host.data(), t);
  for (char b : host)
    if (b != 0) return false;
  return true;
}

// 50257 rows padded to 50304: after 20 steps of versions 1 to 3, and of v3 with the fused
// classifier, the padding rows of the weights, of their bf16 copy and of the gradients are
// still zero.
TEST(VocabPadding, PaddingRowsStayZeroAfterTwentySteps) {
  REQUIRE_GPU();
  for (auto [version, fused] : {std::pair{1, false}, {2, false}, {3, false}, {3, true}}) {
    SCOPED_TRACE(testing::Message() << "v" << version << (fused ? " + fused-classifier" : ""));
    TrainOptions o = gpt2_vocab_options(version);
    o.backend.plan.fused_classifier = fused;
    auto be = make_backend(o.backend);
    Llama m(o.model, *be, o.batch, o.seq_len);
    EXPECT_EQ(m.padded_vocab(), 50304);
    m.init_weights(1);
    auto data = make_data_source("synthetic", o.model.vocab_size, o.batch, o.seq_len, 1);
    Batch b;
    AdamWStep s;
    for (int step = 1; step <= 20; ++step) {
      data->next_batch(b);
      m.set_batch(b.tokens.data(), b.targets.data());
      s.t = step;
      m.train_step(s);
      ASSERT_TRUE(std::isfinite(m.mean_loss()));
    }
    const std::vector<Tensor> rows = m.padding_rows();
    ASSERT_EQ(rows.size(), 3u);  // values, bf16 copy, gradients
    for (const Tensor& t : rows) EXPECT_TRUE(all_zero_bytes(*be, t)) << "a padding row is not zero";
  }
}

// A checkpoint of a model trained at vocabulary 50257 on the GPU holds 50257 rows (the CPU
// reference, which pads nothing, loads it), and resuming it continues bit for bit.
TEST(VocabPadding, CheckpointsHoldTheRealVocabularyAndResumeBitForBit) {
  REQUIRE_GPU();
  ScratchDir dir{"gpu"};
  std::ostringstream log;
  TrainOptions o = gpt2_vocab_options(3);
  o.backend.plan.fused_classifier = true;
  o.steps = 8;
  expect_resume_continues_bit_for_bit(o, dir, log);

  auto cpu = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama on_cpu(o.model, *cpu, 1, 8);
  EXPECT_EQ(on_cpu.padded_vocab(), 50257);
  load_checkpoint(dir.file("full.safetensors"), on_cpu);
  EXPECT_EQ(on_cpu.params().numel, o.model.param_count());
}

// GPT-2 small's matrices (hidden 768, 12 layers, vocabulary 50257) on a short batch, fp32, v3
// with the fused classifier in chunks of 24 tokens, against the CPU in double; then in bf16 with
// the products cuBLAS picks with a workspace and without one (bf16 only:
// products_without_workspace_misfit). Twelve layers deep, bf16's query and key weight gradients
// are 2.0-2.9% off (H200, without a workspace), past the 2% of the two-layer tests: 4% here.
TEST(RealSizes, Gpt2SmallMatchesTheCpu) {
  REQUIRE_GPU();
  const Preset& preset = find_preset("gpt2-small");
  Plan p = plan_for_version(3);
  p.fused_classifier = true;
  p.classifier_chunk = 24;
  expect_gradients_match(preset.model, p, 1, 64, 1e-5, 1e-4);
  p.amp = true;
  for (bool without : {false, true}) {
    SCOPED_TRACE(without ? "bf16 without a workspace" : "bf16 with a workspace");
    p.products_without_workspace = without;
    expect_gradients_match(preset.model, p, 1, 64, 2e-2, 4e-2);
  }
}

}  // namespace
}  // namespace tt::test

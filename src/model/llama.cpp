#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "model/op_sequences.h"

namespace tt {

namespace {

// Tokens per chunk of the fused classifier: what the plan asks for, else chunks of logits of at
// most kChunkBytes, all the same size; without the switch, all tokens in one. Each chunk but the
// first adds its part of the head's weight gradient to the others' (a read and a write of the
// fp32 gradient, 155 MB at GPT-2's vocabulary), and smaller chunks make smaller products:
// gpt2-small (16384 tokens of 100 KB of logits) ran 33.0, 32.1, 31.4, 31.1 and 31.1 ms a step
// in chunks of 1024, 2048, 4096, 8192 and 16384 tokens on an H100. 1 GiB gives two of 8192.
constexpr int64_t kChunkBytes = int64_t(1) << 30;
int classifier_chunk_for(const Plan& plan, int64_t tokens, int padded_vocab, size_t act_bytes) {
  if (!plan.fused_classifier) return int(tokens);
  if (plan.classifier_chunk > 0) return int(std::min<int64_t>(plan.classifier_chunk, tokens));
  const int64_t row_bytes = int64_t(padded_vocab) * int64_t(act_bytes);
  const int64_t chunks = std::max<int64_t>(1, (tokens * row_bytes + kChunkBytes - 1) / kChunkBytes);
  return int((tokens + chunks - 1) / chunks);
}

}  // namespace

// Measures the layout without allocating: what memory_needed reports, and the first half of
// the allocating constructor below.
Llama::Llama(const ModelConfig& config, Backend& backend, int batch, int seq_len, DataParallel dp, StepOptions step,
             MeasureOnly)
    : cfg_(config),
      be_(backend),
      B_(batch),
      T_(seq_len),
      step_(step),
      Vp_(tt::padded_vocab(config.vocab_size, backend.vocab_padding_multiple())),
      chunk_(classifier_chunk_for(backend.plan(), tokens(), Vp_, dtype_size(backend.act_dtype()))),
      attn_{batch, seq_len, config.heads, config.kv_heads, config.head_dim()},
      fp8_(config, backend, tokens(), Vp_, chunk_),
      state_(cfg_, backend, dp, step, Vp_),
      arena_(dp.comm && dp.comm->memory() ? *dp.comm->memory() : backend.memory()) {
  TT_CHECK(step.micro_batches >= 1, "Llama: at least one micro-batch a step (TrainOptions::validate refuses it)");
  for (int l = 0; l < cfg_.layers; ++l) layer_names_.push_back("layer." + std::to_string(l));
  arena_.measure([this](Arena& a) { layout(a); });
}

Llama::Llama(const ModelConfig& config, Backend& backend, int batch, int seq_len, DataParallel dp, StepOptions step)
    : Llama(config, backend, batch, seq_len, dp, step, MeasureOnly{}) {
  arena_.build([this](Arena& a) { layout(a); });
  // The parameters' and gradients' regions (the parameters first), laid out from the same
  // configuration on every rank: the buffers of the gradients' sums, ZeRO-1's gathers and the
  // gathered lookup. (The Adam moments after them differ with ZeRO-1's parts; the norm's sum of
  // squares, in the workspace, is summed outside the window.)
  if (state_.distributed()) state_.comm()->share(arena_.base(), arena_.bytes_through(Category::Gradients));
  w_ = weight_views(cfg_, state_.params_act().empty() ? state_.params() : state_.params_act(), Vp_);
  g_ = weight_views(cfg_, state_.grads(), Vp_);
  swiglu_in_gate_up_misfit_ = swiglu_in_gate_up_misfit();
  swiglu_in_down_gradient_misfit_ = swiglu_in_down_gradient_misfit();
  rope_in_qkv_misfit_ = rope_in_qkv_misfit();
  block_forward_misfit_ = block_forward_misfit();
  // The padding rows of the head are zero for good: AdamW updates the real parameters only.
  for (const Tensor& t : padding_rows()) be_.zero(t);
  // RoPE's cos/sin table, computed once in double and stored in the acc type.
  const std::vector<double> table = rope_table(T_, cfg_.head_dim(), cfg_.rope_theta);
  std::vector<float> table_f(table.begin(), table.end());
  if (rope_table_.dtype == DType::F64)
    be_.upload(rope_table_, table.data());
  else
    be_.upload(rope_table_, table_f.data());
  be_.set_attention_rope(rope_table_);
  fp8_.init_slots(loss_grad_scale());
}

std::array<size_t, kNumCategories> Llama::memory_needed(const ModelConfig& config, Backend& backend, int batch,
                                                        int seq_len, DataParallel dp, StepOptions step) {
  const Llama shell(config, backend, batch, seq_len, dp, step, MeasureOnly{});
  std::array<size_t, kNumCategories> bytes{};
  for (int c = 0; c < kNumCategories; ++c) bytes[size_t(c)] = shell.arena_.bytes(Category(c));
  return bytes;
}

void Llama::layout(Arena& a) {
  const DType A = be_.act_dtype(), S = be_.acc_dtype();
  const int64_t N = tokens();
  const int64_t C = cfg_.hidden, F = cfg_.intermediate, HD = int64_t(cfg_.heads) * cfg_.head_dim();
  const TensorSpec saved = be_.attention_saved(attn_);
  state_.layout(a);
  const int lookup_ranks = lookup_gathered() ? state_.world_size() : 1;
  if (lookup_gathered()) {
    lookup_rows_ = a.take(Category::Gradients, A, lookup_ranks * N * C);
    lookup_tokens_ = a.take(Category::Gradients, DType::I32, lookup_ranks * N);
  }

  auto act = [&](DType d, int64_t n) { return a.take(Category::Activations, d, n); };
  auto scratch = [&](DType d, int64_t n) { return a.take(Category::Workspace, d, n); };
  // With FP8 the products read the inputs' FP8 forms, and the backward only their transposes: the
  // act-typed norm and SwiGLU outputs live until the product after them, in buffers the layers share.
  const bool fp8 = fp8_.on();
  const Tensor norm_out = fp8 ? scratch(A, N * C) : Tensor{}, swiglu_out = fp8 ? scratch(A, N * F) : Tensor{};
  fp8_.layout(a);
  const int64_t inputs = N * step_.micro_batches;
  tokens_ = act(DType::I32, inputs);
  targets_ = act(DType::I32, inputs);
  acts_.clear();
  for (int l = 0; l < cfg_.layers; ++l) {
    LayerActs la;
    la.x = act(A, N * C);
    la.xn1 = fp8 ? norm_out : act(A, N * C);
    la.rstd1 = act(S, N);
    la.qkv = act(A, N * cfg_.qkv_dim());
    la.saved = act(saved.dtype, saved.numel);
    la.att = act(A, N * HD);
    la.x_mid = act(A, N * C);
    la.xn2 = fp8 ? norm_out : act(A, N * C);
    la.rstd2 = act(S, N);
    la.gateup = act(A, N * 2 * F);
    la.h = fp8 ? swiglu_out : act(A, N * F);
    acts_.push_back(la);
  }
  x_out_ = act(A, N * C);
  xf_ = act(A, N * C);
  rstd_f_ = act(S, N);
  logits_ = act(A, int64_t(chunk_) * Vp_);  // becomes dlogits in the backward
  losses_ = act(S, inputs);

  rope_table_ = scratch(S, int64_t(T_) * cfg_.head_dim());
  branch_ = scratch(A, N * C);
  d_normed_ = scratch(A, N * C);
  d_norm_in_ = scratch(A, N * C);
  dqkv_ = scratch(A, N * cfg_.qkv_dim());
  datt_ = scratch(A, N * HD);
  dh_ = scratch(A, N * F);
  // The first residual-stream and gate/up gradient buffers, then the grouping's question of them
  // (in every pass, the measuring one too, so memory_needed counts the buffers it adds), then the
  // buffers it adds.
  dres_ring_.assign(1, scratch(A, N * C));
  dres_ = dres_ring_[0];
  dgateup_ = dgateups_[0] = scratch(A, N * 2 * F);
  grouped_dw_ = weight_gradients_misfit(weight_views(cfg_, state_.grads(), Vp_).layers[0], acts_[0]).empty();
  dw_behind_ = grouped_dw_ && weight_gradients_behind_misfit().empty();
  while (dres_ring_.size() < (dw_behind_ ? 4u : grouped_dw_ ? 2u : 1u)) dres_ring_.push_back(scratch(A, N * C));
  if (dw_behind_) dgateups_[1] = scratch(A, N * 2 * F);
  be_.layout_workspace(a, ModelShape{B_, T_, cfg_.hidden, cfg_.heads, cfg_.kv_heads,
                                     cfg_.head_dim(), cfg_.intermediate, cfg_.vocab_size, lookup_ranks});
}

std::vector<Tensor> Llama::padding_rows() const {
  const int64_t P = cfg_.param_count(), pad = state_.params().numel - P;
  std::vector<Tensor> rows;
  if (pad > 0)
    for (const Tensor* t : {&state_.params(), &state_.params_act(), &state_.grads()})
      if (!t->empty()) rows.push_back(t->slice(P, pad));
  return rows;
}

std::array<size_t, kNumCategories> Llama::padding_bytes() const {
  const int64_t rows = Vp_ - cfg_.vocab_size;
  const size_t weights = size_t(rows) * size_t(cfg_.hidden);
  std::array<size_t, kNumCategories> b{};
  const Tensor &params = state_.params(), &act = state_.params_act();
  b[size_t(Category::Parameters)] = weights * (params.bytes() + act.bytes()) / size_t(params.numel);
  b[size_t(Category::Gradients)] = weights * dtype_size(state_.grads().dtype);
  b[size_t(Category::Activations)] = size_t(rows) * size_t(chunk_) * dtype_size(logits_.dtype);
  return b;
}

std::vector<Llama::MemoryPoint> Llama::memory_timeline() const {
  auto bytes = +[](const Tensor& t) { return (t.bytes() + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment; };
  std::vector<size_t> layer(size_t(cfg_.layers));
  for (int l = 0; l < cfg_.layers; ++l) {
    const LayerActs& a = acts_[size_t(l)];
    for (const Tensor* t : {&a.x, &a.rstd1, &a.qkv, &a.saved, &a.att, &a.x_mid, &a.rstd2, &a.gateup})
      layer[size_t(l)] += bytes(*t);
    if (fp8_.on()) {  // the norms' and SwiGLU's outputs are shared workspace; the inputs' transposes are kept
      layer[size_t(l)] += fp8_.kept_bytes(l, bytes);
    } else {
      for (const Tensor* t : {&a.xn1, &a.xn2, &a.h}) layer[size_t(l)] += bytes(*t);
    }
  }
  const size_t inputs = bytes(tokens_) + bytes(targets_);
  const size_t final_acts = bytes(x_out_) + bytes(xf_) + bytes(rstd_f_), head = bytes(logits_) + bytes(losses_);
  std::vector<MemoryPoint> points;
  auto add = [&](const std::string& region, size_t activations) {
    MemoryPoint p{region, {}};
    for (int c = 0; c < kNumCategories; ++c) p.live[size_t(c)] = arena_.bytes(Category(c));
    p.live[size_t(Category::Activations)] = activations;
    points.push_back(p);
  };
  size_t live = inputs;
  for (int l = 0; l < cfg_.layers; ++l) add("forward/" + layer_names_[size_t(l)], live += layer[size_t(l)]);
  add("forward/final_norm", live += final_acts);
  add("forward/head_loss", live += head);
  add("backward/head_loss", live -= head);  // the logits, become dlogits, are consumed here
  add("backward/final_norm", live -= final_acts);
  for (int l = cfg_.layers - 1; l >= 0; --l) add("backward/" + layer_names_[size_t(l)], live -= layer[size_t(l)]);
  add("optimizer", live);
  return points;
}

void Llama::init_weights(uint64_t seed, double std) {
  for (const ParamEntry& e : param_table(cfg_)) write(state_.params().slice(e.offset, e.numel), initial_values(e, seed, std));
  be_.zero(state_.grads());
  be_.zero(state_.adam_m());
  be_.zero(state_.adam_v());
}

void Llama::set_batch(const int32_t* tok, const int32_t* tgt, int micro_batches) {
  TT_CHECK(micro_batches >= 1 && micro_batches <= step_.micro_batches, "set_batch: more micro-batches than the model's");
  const int64_t n = tokens() * micro_batches;
  for (int64_t i = 0; i < n; ++i)
    if (tok[i] < 0 || tok[i] >= cfg_.vocab_size || tgt[i] < 0 || tgt[i] >= cfg_.vocab_size)
      usage_fail("token id out of range [0, " + std::to_string(cfg_.vocab_size) + ") in the batch");
  ScopedRange range(be_, "inputs");
  be_.upload(tokens_.slice(0, n), tok);
  be_.upload(targets_.slice(0, n), tgt);
  loaded_ = micro_batches;
}

std::vector<Llama::Block> Llama::blocks(Proj p) const {
  const Plan& plan = be_.plan();
  const int D = cfg_.head_dim(), F = cfg_.intermediate;
  if (p == Proj::Qkv && !plan.qkv_fusion)  // q, k and v
    return {{0, cfg_.heads * D}, {attn_.k_col(), cfg_.kv_heads * D}, {attn_.v_col(), cfg_.kv_heads * D}};
  if (p == Proj::GateUp && !plan.gate_up_fusion) return {{0, F}, {F, F}};  // gate and up
  return {{0, out_features(p)}};
}

Fp8Operands Llama::cast_input(int l, Proj p, const Tensor& x, bool x_cast) {
  const Fp8Operands f8 = fp8_.operands(l, p);
  if (!f8.empty() && !x_cast) fp8_.cast(f8.x, x, tokens(), in_features(p));
  return f8;
}

void Llama::project(int l, Proj p, const Tensor& out, const Tensor& x, const Tensor& w, bool x_cast) {
  const int in_f = in_features(p), ld = out_features(p);
  const Fp8Operands f8 = cast_input(l, p, x, x_cast);
  for (const Block& b : blocks(p))
    be_.matmul(linear_product(out.slice(b.col, out.numel - b.col), ld, x,
                              w.slice(b.col * in_f, int64_t(b.width) * in_f), int(tokens()), in_f, b.width,
                              f8.weight_rows(b.col, b.width)));
}

void Llama::project_backward(int l, Proj p, const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                             const Tensor& w, bool dout_cast) {
  project_input_gradient(l, p, dx, dout, w, dout_cast);
  project_weight_gradient(l, p, dw, dout, x);
}

void Llama::project_input_gradient(int l, Proj p, const Tensor& dx, const Tensor& dout, const Tensor& w,
                                   bool dout_cast) {
  const int in_f = in_features(p), ld = out_features(p);
  const Fp8Operands f8 = fp8_.operands(l, p);
  const Fp8Matrix dout8 = fp8_.gradient(l, p);
  if (fp8_.on() && !dout_cast) fp8_.cast(dout8, dout, tokens(), ld);
  float beta = 0.0f;  // the first block writes dx, the others add to it
  for (const Block& b : blocks(p)) {
    linear_input_gradient(be_, dx, beta, dout.slice(b.col, dout.numel - b.col), ld,
                          w.slice(b.col * in_f, int64_t(b.width) * in_f), int(tokens()), in_f, b.width,
                          f8.weight_rows(b.col, b.width), dout8.col_block(b.col, b.width));
    beta = 1.0f;
  }
}

void Llama::project_weight_gradient(int l, Proj p, const Tensor& dw, const Tensor& dout, const Tensor& x) {
  const int in_f = in_features(p), ld = out_features(p);
  const Fp8Operands f8 = fp8_.operands(l, p);
  const Fp8Matrix dout8 = fp8_.gradient(l, p);
  for (const Block& b : blocks(p)) {
    const Tensor dw_b = dw.slice(b.col * in_f, int64_t(b.width) * in_f), dout_b = dout.slice(b.col, dout.numel - b.col);
    if (grouped_dw_) {  // made with the layer's others (weight_gradients_done)
      layer_dw_.push_back(linear_dw_gemm(dw_b, dout_b, ld, x, in_f, int(tokens()), in_f, b.width));
      layer_dw_.back().beta = dw_beta();
    } else {
      linear_weight_gradient(be_, dw_b, dw_beta(), dout_b, ld, x, int(tokens()), in_f, b.width,
                             f8.weight_rows(b.col, b.width), dout8.col_block(b.col, b.width));
    }
  }
}

// grouped-weight-gradients: why a layer's weight gradients (into g, from the activations a) do not
// wait for the end of its backward to go to the backend as one group; empty where they do. Only
// where the backend makes them in one launch (matmul_group_misfit: the switch, bf16 products, the
// shapes). Every layer's are alike: layout() asks of the first, and the answer holds for the run.
std::string Llama::weight_gradients_misfit(const LayerWeights& g, const LayerActs& a) const {
  if (fp8_.on()) return "FP8 products";
  if (!be_.plan().grouped_weight_gradients) return "grouped-weight-gradients off";
  // Not run on several GPUs (no machine of several was lent when it went in), so not taken there.
  if (state_.distributed()) return "several ranks";
  if (!be_.plan().qkv_fusion || !be_.plan().gate_up_fusion) return "without qkv-fusion and gate-up-fusion";
  const int n = int(tokens()), C = cfg_.hidden, F = cfg_.intermediate, Q = cfg_.qkv_dim();
  const int HD = cfg_.heads * cfg_.head_dim();
  return be_.matmul_group_misfit({linear_dw_gemm(g.wdown, dres_, C, a.h, F, n, F, C),
                                  linear_dw_gemm(g.wgateup, dgateup_, 2 * F, a.xn2, C, n, C, 2 * F),
                                  linear_dw_gemm(g.wo, dres_, C, a.att, HD, n, HD, C),
                                  linear_dw_gemm(g.wqkv, dqkv_, Q, a.xn1, C, n, C, Q)});
}

// The header's Products: line: the FP8 products, then each fused piece of the plan, used or why not.
std::string Llama::products_kind() const {
  std::string s = fp8_.description();
  if (!be_.is_cuda()) return s;
  auto piece = [&s](const std::string& what, const std::string& misfit, const std::string& used,
                    const std::string& unused) {
    s += (s.empty() ? "" : "; ") + what + " " + (misfit.empty() ? used : unused + " (" + misfit + ")");
  };
  const Plan& plan = be_.plan();
  if (plan.products_without_workspace)
    piece("cuBLAS", products_without_workspace_misfit(plan), "without a workspace (products-without-workspace)",
          "with a workspace");
  if (plan.swiglu_in_gate_up)
    piece("SwiGLU", swiglu_in_gate_up_misfit_, "in the gate/up product's epilogue (swiglu-in-gate-up)",
          "a kernel of its own");
  if (plan.swiglu_in_down_gradient)
    piece("SwiGLU's backward", swiglu_in_down_gradient_misfit_,
          "in down's input gradient's epilogue (swiglu-in-down-gradient)", "a kernel of its own");
  if (plan.rope_in_qkv_product)
    piece("RoPE", rope_in_qkv_misfit_, "in the QKV product's epilogue (rope-in-qkv-product)", "a kernel of its own");
  if (plan.blocks_forward_in_one_launch)
    piece("the layers' forward", block_forward_misfit_, "in one launch (blocks-forward-in-one-launch)",
          "a kernel an operation");
  if (plan.blocks_backward_in_one_launch)  // measured alone and slower (docs/versions/v6.md): not wired in
    piece("the layers' backward",
          "blocks-backward-in-one-launch runs in `tiny_llama kernels --ops block_backward`, not in the model", "",
          "a kernel an operation");
  if (plan.grouped_weight_gradients)
    piece("weight gradients", weight_gradients_misfit(g_.layers[0], acts_[0]),
          std::string("a layer's four in one launch (grouped-weight-gradients)") +
              (dw_behind_ ? ", beside the layers below (weight-gradients-behind)"
               : plan.weight_gradients_behind ? ", on the main stream (" + weight_gradients_behind_misfit() + ")"
                                              : ""),
          "one a launch");
  return s;
}

// swiglu-in-gate-up: layer l's gate/up product in the act type (bf16), and why the backend does not
// make SwiGLU in its epilogue (empty where it does); swiglu-in-down-gradient likewise for down's
// input gradient and SwiGLU's backward. Neither with FP8 products or gate and up apart; the
// switches themselves are the backend's to read. Every layer's products are alike: the constructor
// asks of the first, and the answer holds for the run.
Gemm Llama::gate_up_product(int l) const {
  const int C = cfg_.hidden, F = cfg_.intermediate;
  return linear_product(acts_[size_t(l)].gateup, 2 * F, acts_[size_t(l)].xn2, w_.layers[size_t(l)].wgateup,
                        int(tokens()), C, 2 * F, {});
}
Gemm Llama::down_input_gradient(int l) const {
  const int C = cfg_.hidden, F = cfg_.intermediate;
  return linear_dx_gemm(dh_, F, dres_, C, w_.layers[size_t(l)].wdown, int(tokens()), F, C, 0.0f);
}
std::string Llama::swiglu_epilogue_misfit() const {
  if (fp8_.on()) return "FP8 products";
  if (!be_.plan().gate_up_fusion) return "without gate-up-fusion";
  return "";
}
std::string Llama::swiglu_in_gate_up_misfit() const {
  const std::string why = swiglu_epilogue_misfit();
  return why.empty() ? be_.gate_up_swiglu_misfit(gate_up_product(0), cfg_.intermediate) : why;
}
// rope-in-qkv-product: layer l's QKV product in the act type, and why the backend does not make
// RoPE in its epilogue (empty where it does), as for SwiGLU above.
Gemm Llama::qkv_product(int l) const {
  const int C = cfg_.hidden, Q = int(attn_.ld());
  return linear_product(acts_[size_t(l)].qkv, Q, acts_[size_t(l)].xn1, w_.layers[size_t(l)].wqkv, int(tokens()), C, Q,
                        {});
}
std::string Llama::rope_in_qkv_misfit() const {
  if (fp8_.on()) return "FP8 products";
  const std::vector<RopeShape> ropes = rope_shapes(be_, attn_);
  if (ropes.empty()) return "RoPE inside the attention (rope-in-attention)";
  return be_.qkv_rope_misfit(qkv_product(0), ropes);
}
// Beside the weight gradients' lane it does not pay past 512 tokens: v6 on an H200 at 8 x 128 1.039-1.043
// ms with it, 1.030-1.031 with cuBLAS's product and the SwiGLU kernel; at 4 x 128 0.861-0.862
// against 0.879-0.880, at 2 x 128 0.780 against 0.795 (docs/versions/v6.md).
std::string Llama::swiglu_in_down_gradient_misfit() const {
  std::string why = swiglu_epilogue_misfit();
  if (why.empty()) why = be_.down_swiglu_backward_misfit(down_input_gradient(0), cfg_.intermediate);
  if (why.empty() && dw_behind_ && tokens() > 512)
    why = std::to_string(tokens()) + " tokens beside the weight gradients' lane (weight-gradients-behind), more than 512";
  return why;
}

// blocks-forward-in-one-launch: every layer's forward after the first attention norm as the layers
// one by one write it, and why the backend does not make it in one launch. It takes the QKV product
// with RoPE and gate/up with SwiGLU as the epilogues above make them, and the output and down
// products with the residual added and the norm after (gemm-epilogues, fused-residual-norm).
BlockForward Llama::blocks_forward() const {
  BlockForward f{{}, rope_table_, rope_shapes(be_, attn_), attn_, cfg_.hidden, cfg_.intermediate, cfg_.norm_eps};
  for (int l = 0; l < cfg_.layers; ++l) {
    const LayerActs& a = acts_[size_t(l)];
    const LayerWeights& w = w_.layers[size_t(l)];
    const bool last = l + 1 == cfg_.layers;
    const LayerActs& n = acts_[size_t(last ? l : l + 1)];
    f.layers.push_back({a.xn1, a.qkv, a.att, a.saved, a.x, a.x_mid, a.xn2, a.rstd2, a.gateup, a.h, last ? x_out_ : n.x,
                        last ? xf_ : n.xn1, last ? rstd_f_ : n.rstd1, w.wqkv, w.wo, w.ffn_norm, w.wgateup, w.wdown,
                        last ? w_.final_norm : w_.layers[size_t(l) + 1].attn_norm});
  }
  return f;
}
std::string Llama::block_forward_misfit() const {
  if (fp8_.on()) return "FP8 products";
  if (!rope_in_qkv_misfit_.empty()) return "RoPE not in the QKV product";
  if (!swiglu_in_gate_up_misfit_.empty()) return "SwiGLU not in the gate/up product";
  if (!be_.plan().gemm_epilogues || !be_.plan().fused_residual_norm) return "without gemm-epilogues and fused-residual-norm";
  return be_.block_forward_misfit(blocks_forward());
}

// The layer's weight-gradient products, made in one group: on the main stream, or with
// weight-gradients-behind on their lane, where AdamW's update of the layer follows them.
void Llama::weight_gradients_done() {
  if (!grouped_dw_) return;
  ScopedRange r(be_, "weight_gradients");
  if (dw_behind_) be_.begin_behind(Backend::Lane::WeightGradients);
  be_.matmul_group(layer_dw_);
  if (dw_behind_) be_.end_behind();
  layer_dw_.clear();
}

// weight-gradients-behind: why a layer's grouped weight gradients stay on the main stream (empty
// where they go on their lane). Measured on an H200 (docs/versions/v6.md): faster up to 4096
// tokens (8 x 128 1.057 -> 1.037-1.039 ms, 1 x 4096 3.822-3.826 -> 3.776-3.780), even at 8192,
// slower at 16384 (16 x 1024 8.568-8.741 -> 8.644-8.793).
std::string Llama::weight_gradients_behind_misfit() const {
  if (!be_.plan().weight_gradients_behind) return "weight-gradients-behind off";
  const int64_t n = tokens();
  if (n > 4096) return std::to_string(n) + " tokens, more than 4096";
  return "";
}

// The buffer a norm's backward writes the residual stream's next gradient into, which dres_ then
// names: the next of dres_ring_ where keep (the gradient dres_ holds is still to be read by a
// weight gradient), else dres_ itself.
Tensor Llama::next_dres(bool keep) {
  if (keep) dres_at_ = (dres_at_ + 1) % dres_ring_.size(), dres_ = dres_ring_[dres_at_];
  return dres_;
}

void Llama::forward(Pass pass, int micro_batch) {
  TT_CHECK(micro_batch >= 0 && micro_batch < loaded_, "forward: a micro-batch the last set_batch did not give");
  ScopedRange range(be_, "forward");
  micro_ = micro_batch;
  head_backward_done_ = false;
  const int64_t N = tokens();
  const int C = cfg_.hidden;
  if (micro_batch == 0) fp8_.cast_weights(w_);  // the weights change only at the update
  {
    ScopedRange r(be_, "embedding");
    be_.embedding_forward(acts_[0].x, micro_slice(tokens_), w_.wte, N, C);
  }
  if (block_forward_misfit_.empty()) {
    attention_norm(0);
    ScopedRange r(be_, "blocks");
    be_.block_forward(blocks_forward());
  } else {
    for (int l = 0; l < cfg_.layers; ++l) {
      ScopedRange r(be_, layer_names_[size_t(l)].c_str());
      forward_attention(l);
      forward_ffn(l);
    }
  }
  if (!be_.plan().fused_residual_norm) {  // else the last layer's residual add did it
    ScopedRange r(be_, "final_norm");
    be_.rmsnorm_forward(xf_, rstd_f_, x_out_, w_.final_norm, N, C, cfg_.norm_eps);
  }
  forward_head(pass);
}

// A layer's output product and the residual add after it: sum = residual + x @ w^T, the
// residual stream's next value. With gemm-epilogues the product adds the residual in its
// epilogue (cuBLASLt, C apart from D); else it writes branch_ and an add follows, inside the next
// RMSNorm's kernel with fused-residual-norm. With fused-residual-norm the RMSNorm of sum that
// comes next (the FFN's, the next layer's attention's, or the final one) is made here too;
// without it, at the start of what comes next.
void Llama::output_and_residual(int l, Proj p, const Tensor& sum, const Tensor& residual, const Tensor& x,
                                const Tensor& w, const NormNext& next, bool x_cast) {
  const Plan& plan = be_.plan();
  const int64_t N = tokens();
  const int C = cfg_.hidden, in_f = in_features(p);
  const Fp8Operands f8 = cast_input(l, p, x, x_cast);
  const ResidualNorm sum_norm{sum, next.out, next.rstd, residual, plan.gemm_epilogues ? Tensor{} : branch_, next.w,
                              N, C, cfg_.norm_eps};
  Gemm g = linear_product(plan.gemm_epilogues ? sum : branch_, C, x, w, int(N), in_f, C, f8);
  if (plan.gemm_epilogues) g.beta = 1.0f, g.c_in = residual;
  be_.matmul(g);
  residual_add(be_, sum_norm);
  if (!plan.fused_residual_norm) return;  // the norm is made where the next block begins
  ScopedRange r(be_, next.range);
  residual_norm(be_, sum_norm, norm_output8(next.layer, next.proj));
}

Fp8Matrix Llama::norm_output8(int l, Proj p) const {
  if (l < 0 || !norm_in_fp8(be_.plan(), fp8_.on(), fp8_.scaling(), cfg_.hidden)) return {};
  return fp8_.operands(l, p).x;
}

Fp8Matrix Llama::residual_gradient8(int l, Proj p) const {
  if (l < 0 || !norm_backward_in_fp8(be_.plan(), fp8_.on(), fp8_.scaling())) return {};
  return fp8_.gradient(l, p);
}

bool Llama::block_norm(int l, Proj p, const ResidualNorm& r) {
  const Fp8Matrix out8 = norm_output8(l, p);
  if ((l == 0 && p == Proj::Qkv) || !be_.plan().fused_residual_norm) {  // else the residual add before did it
    ScopedRange range(be_, p == Proj::Qkv ? "attention_norm" : "ffn_norm");
    residual_norm(be_, r, out8);
  }
  return !out8.slot.empty();
}

bool Llama::attention_norm(int l) {
  const LayerActs& a = acts_[size_t(l)];
  return block_norm(l, Proj::Qkv,
                    {a.x, a.xn1, a.rstd1, {}, {}, w_.layers[size_t(l)].attn_norm, tokens(), cfg_.hidden, cfg_.norm_eps});
}

// The tied output head and the loss, a chunk of tokens at a time (one chunk without the fused
// classifier). With the fused classifier in training, each chunk's logits become their
// gradient in the same pass that computes the loss, and the chunk's two backward products
// follow at once: the gradient of the final norm's output (rows of d_normed_, which nothing
// touches before the backward reads it) and the head's weight gradient, written by the first
// chunk (of the first micro-batch) and added to by the others.
void Llama::forward_head(Pass pass) {
  ScopedRange r(be_, "head_loss");
  const int64_t N = tokens();
  const int C = cfg_.hidden, V = cfg_.vocab_size;
  // In FP8 (fp8-head): xf cast once, the chunks' products from its rows, the weight gradient's
  // from its columns; the logits' gradient made in FP8 by the cross-entropy pass itself.
  const Fp8Operands f8 = fp8_.head_on() ? fp8_.head_operands() : Fp8Operands{};
  if (!f8.empty()) fp8_.cast(f8.x, xf_, N, C);
  for (int64_t first = 0; first < N; first += chunk_) {
    const int rows = int(std::min<int64_t>(chunk_, N - first));
    const Tensor xf = xf_.slice(first * C, int64_t(rows) * C), losses = micro_slice(losses_).slice(first, rows),
                 targets = micro_slice(targets_).slice(first, rows);
    const Fp8Operands chunk8 = f8.empty() ? f8 : Fp8Operands{f8.x.row_block(first, rows), f8.w};
    be_.matmul(linear_product(logits_, Vp_, xf, w_.head, rows, C, Vp_, chunk8));
    if (!f8.empty() && pass == Pass::Train) {
      be_.fp8_cross_entropy_fused(fp8_.head_gradient(), fp8_.head_scratch(), losses, logits_, targets, rows, V, Vp_,
                                  loss_grad_scale());
      head_backward_done_ = true;
    } else {
      head_backward_done_ = cross_entropy_loss(be_, pass == Pass::Train, losses, logits_, targets, rows, V, Vp_,
                                               loss_grad_scale());
    }
    if (!head_backward_done_) continue;
    linear_backward(be_, d_normed_.slice(first * C, int64_t(rows) * C), 0.0f, g_.head, first == 0 ? dw_beta() : 1.0f,
                    logits_, Vp_, xf, w_.head, rows, C, Vp_, chunk8, fp8_.head_gradient());
  }
}

void Llama::forward_attention(int l) {
  const LayerActs& a = acts_[size_t(l)];
  const LayerWeights& w = w_.layers[size_t(l)];
  const bool xn_cast = attention_norm(l);
  ScopedRange r(be_, "attention");
  if (rope_in_qkv_misfit_.empty()) {
    be_.qkv_rope(qkv_product(l), rope_table_, rope_shapes(be_, attn_));
  } else {
    project(l, Proj::Qkv, a.qkv, a.xn1, w.wqkv, xn_cast);
    for (const RopeShape& s : rope_shapes(be_, attn_)) be_.rope_forward(a.qkv, rope_table_, s);
  }
  const Fp8Matrix att8 =
      attention_in_fp8(be_.plan(), fp8_.on(), fp8_.scaling()) ? fp8_.operands(l, Proj::Out).x : Fp8Matrix{};
  attention_forward(be_, a.att, a.saved, a.qkv, attn_, att8);
  output_and_residual(l, Proj::Out, a.x_mid, a.x, a.att, w.wo, {"ffn_norm", a.xn2, a.rstd2, w.ffn_norm, l, Proj::GateUp},
                      !att8.slot.empty());
}

void Llama::forward_ffn(int l) {
  const Plan& plan = be_.plan();
  const int64_t N = tokens();
  const int C = cfg_.hidden, F = cfg_.intermediate;
  const LayerActs& a = acts_[size_t(l)];
  const LayerWeights& w = w_.layers[size_t(l)];
  const bool last = l + 1 == cfg_.layers;
  const Tensor& x_next = last ? x_out_ : acts_[size_t(l) + 1].x;
  const bool xn_cast = block_norm(l, Proj::GateUp, {a.x_mid, a.xn2, a.rstd2, {}, {}, w.ffn_norm, N, C, cfg_.norm_eps});
  ScopedRange r(be_, "ffn");
  const bool h_in_fp8 = swiglu_in_fp8(plan, fp8_.on());
  if (swiglu_in_gate_up_misfit_.empty()) {
    be_.gate_up_swiglu(gate_up_product(l), a.h, N, F);
  } else {
    project(l, Proj::GateUp, a.gateup, a.xn2, w.wgateup, xn_cast);
    ffn_swiglu_forward(be_, a.h, h_in_fp8 ? fp8_.operands(l, Proj::Down).x : Fp8Matrix{}, a.gateup, N, F,
                       fp8_.scaling());
  }
  const NormNext next = last ? NormNext{"final_norm", xf_, rstd_f_, w_.final_norm, -1, Proj::Qkv}
                             : NormNext{"attention_norm", acts_[size_t(l) + 1].xn1, acts_[size_t(l) + 1].rstd1,
                                        w_.layers[size_t(l) + 1].attn_norm, l + 1, Proj::Qkv};
  output_and_residual(l, Proj::Down, x_next, a.x_mid, a.h, w.wdown, next, h_in_fp8);
}

void Llama::backward() {
  backward_pass(false);
  be_.wait_behind();  // the gradients' reductions
}

void Llama::backward_pass(bool update_behind) {
  ScopedRange range(be_, "backward");
  const int64_t N = tokens();
  const int C = cfg_.hidden, V = cfg_.vocab_size;
  if (!head_backward_done_) {
    TT_CHECK(!be_.plan().fused_classifier, "backward() after a forward for evaluation: run forward() to train");
    ScopedRange r(be_, "head_loss");
    // No gradient is zeroed: each is written by its one product or reduction (the head's
    // product writes the tied embedding's, which the embedding backward then adds to).
    // The logits buffer becomes dlogits.
    cross_entropy_gradient(be_, logits_, micro_slice(targets_), N, V, Vp_, loss_grad_scale());
    linear_backward(be_, d_normed_, 0.0f, g_.head, dw_beta(), logits_, Vp_, xf_, w_.head, int(N), C, Vp_);
  }
  // The lookup adds: to the tied head's gradient the head's product wrote, or to an untied one
  // zeroed here (before the embedding's bucket may be summed early).
  if (!cfg_.tie_embeddings && !accumulating()) be_.zero(g_.wte);
  const bool last = micro_ + 1 == step_.micro_batches, gathered = last && lookup_gathered();
  if (gathered)
    for (size_t b = state_.first_embedding_bucket(); b < state_.buckets(); ++b) state_.reduce_early(b);
  {
    ScopedRange r(be_, "final_norm");
    const Fp8Matrix dres8 = residual_gradient8(cfg_.layers - 1, Proj::Down);
    if (dres8.slot.empty())
      be_.rmsnorm_backward(dres_, g_.final_norm, d_normed_, x_out_, w_.final_norm, rstd_f_, N, C, accumulating());
    else
      be_.fp8_rmsnorm_backward(dres8, dres_, g_.final_norm, d_normed_, x_out_, w_.final_norm, rstd_f_, N, C, false,
                               accumulating());
  }
  // dres holds the gradient of the residual stream, from the last layer down. Each bucket of
  // gradients (a layer's, the last layer's with the final norm's, the embedding's pieces) is finished
  // behind the backward as soon as it is complete (bucket_complete), in the last micro-batch.
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    ScopedRange r(be_, layer_names_[size_t(l)].c_str());
    backward_ffn(l);
    backward_attention(l, last && update_behind && l == 0);
    if (last && l > 0) layer_complete(l, update_behind);
  }
  // The embedding's chain (gathered, added, updated, gathered again) is the step's longest after
  // the backward, and it needs the residual gradient alone: it goes ahead of the first layer's sum.
  if (gathered)
    state_.complete_early_sum([this] { gather_lookup(); }, [this] { embedding_backward_gathered(); });
  if (last) {
    ScopedRange r(be_, layer_names_[0].c_str());
    layer_complete(0, update_behind);
  }
  if (gathered) {
    for (size_t b = state_.first_embedding_bucket(); b < state_.buckets(); ++b)
      state_.bucket_complete(b, update_behind, true);
    state_.finish_behind();
    return;
  }
  {
    ScopedRange r(be_, "embedding");
    be_.embedding_backward(g_.wte, dres_, micro_slice(tokens_), N, C, V);
  }
  if (last) {
    for (size_t b = state_.first_embedding_bucket(); b < state_.buckets(); ++b)
      state_.bucket_complete(b, update_behind);
    state_.finish_behind();
  }
}

// Compared per hidden column: the gathered rows (ranks x tokens, act-typed) against the
// embedding's rows in the reduction's type. At gpt2-small's shape on 2 ranks, 2 x 16384 x 2 bytes
// against 50304 x 4; not for medium's vocabulary of 1,000 (16 x 512 tokens).
bool Llama::lookup_gathered() const {
  if (!state_.distributed()) return false;
  const int64_t rows = int64_t(state_.world_size()) * tokens() * int64_t(dtype_size(be_.act_dtype()));
  return rows < int64_t(Vp_) * int64_t(dtype_size(state_.reduce_dtype()));
}

// On the communication lane: this rank's residual gradient and tokens into its slot, and every
// rank's gathered.
void Llama::gather_lookup() {
  ScopedRange r(be_, "gradient_reduction");
  const int64_t N = tokens();
  const int C = cfg_.hidden, W = state_.world_size(), me = state_.rank();
  be_.convert(lookup_rows_.slice(me * N * C, N * C), dres_);
  be_.convert(lookup_tokens_.slice(me * N, N), micro_slice(tokens_));
  state_.comm()->all_gather(lookup_rows_, split_offsets(W * N * C, W));  // N C a rank
  state_.comm()->all_gather(lookup_tokens_, split_offsets(W * N, W));
}

// After the embedding's early sum and gather_lookup: the lookup's gradient of every rank's tokens
// added to the sum in one pass (each token's rows in rank order), so every rank adds the same bits.
void Llama::embedding_backward_gathered() {
  ScopedRange r(be_, "embedding");
  be_.embedding_backward(g_.wte, lookup_rows_, lookup_tokens_, state_.world_size() * tokens(), cfg_.hidden,
                         cfg_.vocab_size);
}

// Layer l's bucket of gradients is complete; with weight-gradients-behind, its update waits for the
// weight gradients' lane too.
void Llama::layer_complete(int l, bool update_behind) {
  if (dw_behind_ && update_behind) update_follows_weight_gradients();
  state_.bucket_complete(size_t(l), update_behind);
}

// weight-gradients-behind: what the update lane runs next waits for the weight gradients' lane.
void Llama::update_follows_weight_gradients() {
  be_.begin_behind(Backend::Lane::Update);
  be_.follow(Backend::Lane::WeightGradients);
  be_.end_behind();
}

void Llama::backward_ffn(int l) {
  const Plan& plan = be_.plan();
  const int64_t N = tokens();
  const int F = cfg_.intermediate;
  const LayerActs& a = acts_[size_t(l)];
  const LayerWeights& w = w_.layers[size_t(l)];
  const LayerWeights& g = g_.layers[size_t(l)];
  dgateup_ = dgateups_[dw_behind_ ? l % 2 : 0];  // the layer above's group may still read the other
  {
    // The input gradients first, the weight gradients after them. Over several ranks the layer
    // above's reduction starts as this layer's backward does and holds some SMs for about 0.1 ms:
    // beside it, down's weight gradient (at gpt2-small one wave of 132 tiles exactly) needed a
    // second wave, 75 -> 126 us. In this order SwiGLU's backward and gate/up's input gradient meet
    // the reduction instead; the latter grows too (+41 us a layer at gpt2-small, +72 at medium),
    // but less (docs/multi-gpu.md).
    ScopedRange r(be_, "ffn");
    const bool dgateup_in_fp8 = swiglu_in_fp8(plan, fp8_.on());
    if (swiglu_in_down_gradient_misfit_.empty()) {
      be_.down_swiglu_backward(down_input_gradient(l), dgateup_, a.gateup, N, F);
    } else {
      project_input_gradient(l, Proj::Down, dh_, dres_, w.wdown, !residual_gradient8(l, Proj::Down).slot.empty());
      ffn_swiglu_backward(be_, dgateup_, dgateup_in_fp8 ? fp8_.gradient(l, Proj::GateUp) : Fp8Matrix{}, dh_, a.gateup,
                          N, F, fp8_.scaling());
    }
    project_input_gradient(l, Proj::GateUp, d_normed_, dgateup_, w.wgateup, dgateup_in_fp8);
    project_weight_gradient(l, Proj::Down, g.wdown, dres_, a.h);
    project_weight_gradient(l, Proj::GateUp, g.wgateup, dgateup_, a.xn2);
  }
  ScopedRange r(be_, "ffn_norm");  // dres: now the gradient of x_mid
  // With the weight gradients grouped, down's reads dres at the layer's end: the new gradient goes
  // into another buffer.
  const Tensor dres_in = dres_;
  residual_norm_backward(be_, next_dres(grouped_dw_), dres_in, d_norm_in_, g.ffn_norm, d_normed_, a.x_mid, w.ffn_norm,
                         a.rstd2, N, cfg_.hidden, accumulating(), residual_gradient8(l, Proj::Out));
}

// ffn_update_ahead: the first layer's, whose update the step's end waits for, in the last
// micro-batch with the updates behind the backward.
void Llama::backward_attention(int l, bool ffn_update_ahead) {
  const LayerActs& a = acts_[size_t(l)];
  const LayerWeights& w = w_.layers[size_t(l)];
  const LayerWeights& g = g_.layers[size_t(l)];
  // With weight-gradients-behind, the layer above's group is done before anything it reads is
  // written again: dqkv_ here, the residual gradient it read at the norm's backward below.
  be_.wait_lane(Backend::Lane::WeightGradients);
  if (ffn_update_ahead && dw_behind_) {
    // The FFN's weight gradients, complete already, and their update go beside this attention's
    // backward instead of after it: the step's end then waits for the attention's part of the
    // layer's update alone, about a fifth of its bytes at the default shape. It pays with the
    // weight-gradient lane above the update lane's priority (cuda_backend.cpp); below it the group
    // waited for layer 1's AdamW to leave the SMs. v6 on an H200 at 8 x 128 1.028-1.029 ->
    // 1.025-1.026 ms with both, 1.027-1.029 with this alone (docs/data/2026-11-30-h200-dw-tiles-beside).
    weight_gradients_done();
    update_follows_weight_gradients();
    state_.update_ffn_ahead(l);
  }
  {
    ScopedRange r(be_, "attention");
    project_backward(l, Proj::Out, datt_, g.wo, dres_, a.att, w.wo, !residual_gradient8(l, Proj::Out).slot.empty());
    const std::vector<RopeShape> ropes = rope_shapes(be_, attn_);
    const bool dqkv_in_fp8 = rope_backward_in_fp8(be_.plan(), fp8_.on(), ropes);
    if (dqkv_in_fp8) {
      be_.attention_backward(dqkv_, datt_, a.qkv, a.att, a.saved, attn_);
      qkv_rope_backward(be_, dqkv_, fp8_.gradient(l, Proj::Qkv), rope_table_, ropes, fp8_.scaling());
    } else {
      be_.attention_rope_backward(dqkv_, datt_, a.qkv, a.att, a.saved, attn_, rope_table_, ropes);
    }
    project_backward(l, Proj::Qkv, d_normed_, g.wqkv, dqkv_, a.xn1, w.wqkv, dqkv_in_fp8);
  }
  weight_gradients_done();  // before the norm's backward writes dres (in place without the lane), which Wo's reads
  ScopedRange r(be_, "attention_norm");  // dres: now the gradient of the layer's input
  const Tensor dres_in = dres_;
  residual_norm_backward(be_, next_dres(dw_behind_), dres_in, d_norm_in_, g.attn_norm, d_normed_, a.x, w.attn_norm,
                         a.rstd1, tokens(), cfg_.hidden, accumulating(), residual_gradient8(l - 1, Proj::Down));
}

void Llama::optimizer_step(const AdamWStep& step) {
  TT_CHECK(!step_.clip || step.max_grad_norm > 0, "optimizer_step: clipping needs a max_grad_norm");
  be_.set_adamw_step(step);
  if (step_.norm_measured()) state_.measure_grad_norm();
  state_.update();
  state_.weights_updated();
  fp8_.finish_step();
}

bool Llama::train_step(const AdamWStep& step, const std::function<bool()>& stop) {
  TT_CHECK(loaded_ == step_.micro_batches, "train_step: set_batch gives every micro-batch of the step");
  TT_CHECK(!step_.clip || step.max_grad_norm > 0, "train_step: clipping needs a max_grad_norm");
  {
    // The optimizer's scalars go up before the step, like its batch. A replayed graph reads
    // them where they land; copying them inside the step would put a copy node between the
    // backward's last kernel and the first AdamW (about 8 us of an H100 step at B8 T128).
    ScopedRange range(be_, "inputs");
    be_.set_adamw_step(step);
  }
  state_.weights_updated();  // (a stopped step may not update them: the masters are gathered anyway)
  // Delayed scaling's first step runs outside the graph, with current scaling (Fp8State::settled).
  const bool settled = fp8_.settled();
  if (be_.plan().cuda_graph && settled && (be_.graph_ready() || be_.graph_capture_begin())) {
    if (!be_.graph_ready()) {
      enqueue_step();
      be_.graph_capture_end();
    }
    be_.graph_replay();
    return true;
  }
  return enqueue_step(stop);
}

// The marks: 0 at the start, 1 before the last micro-batch (the earlier ones done), 2 after its
// forward, 3 after its backward, 4 after the update: one micro-batch's forward and backward are
// measured as such, whatever the accumulation. With fused-adamw the updates run behind the backward
// pass (backward_pass), and what is left of the optimizer after the backward, between marks 3 and
// 4, is the wait for the last of them. Clipping needs every gradient before any update: the
// updates then follow the norm.
bool Llama::enqueue_step(const std::function<bool()>& stop) {
  const bool behind = be_.plan().fused_adamw && !step_.clip;
  be_.mark(0);
  for (int i = 0; i < step_.micro_batches; ++i) {
    const bool last = i + 1 == step_.micro_batches;
    if (last) be_.mark(1);
    forward(Pass::Train, i);
    if (last) be_.mark(2);
    backward_pass(behind);
    if (!last) be_.wait_lane(Backend::Lane::WeightGradients);  // the next forward writes what they read
    if (stop && !last && stop()) return false;
  }
  be_.mark(3);
  {
    ScopedRange range(be_, "optimizer");
    be_.wait_behind();  // the updates behind the backward, or the gradients' reductions
  }
  if (step_.norm_measured()) state_.measure_grad_norm();
  if (!behind) state_.update();
  fp8_.finish_step();
  be_.mark(4);
  return true;
}

double Llama::mean_loss() {
  std::vector<double> sum = {loss_sum(B_ * loaded_)};
  if (state_.distributed()) state_.comm()->all_reduce_sum(sum);  // the mean over every rank's tokens
  return sum[0] / double(tokens() * loaded_ * state_.world_size());
}

double Llama::loss_sum(int sequences) {
  TT_CHECK(sequences >= 0 && sequences <= B_ * loaded_, "loss_sum: more sequences than the batch");
  ScopedRange range(be_, "loss_readback");
  const std::vector<double> losses = read(losses_);
  double sum = 0;
  for (int64_t i = 0; i < int64_t(sequences) * T_; ++i) sum += losses[size_t(i)];  // in order, in double
  return sum;
}

}  // namespace tt

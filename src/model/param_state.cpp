#include "model/param_state.h"

#include <algorithm>
#include <cmath>

namespace tt {

ParamState::ParamState(const ModelConfig& config, Backend& backend, DataParallel dp, StepOptions step, int padded_vocab)
    : cfg_(config),
      be_(backend),
      step_(step),
      comm_(dp.comm),
      dp_(dp.comm && !dp.comm->solo()),
      zero_(dp_ ? dp.zero : 0),
      rank_(dp.comm ? dp.comm->rank() : 0),
      world_(dp.comm ? dp.comm->size() : 1),
      reduce_dtype_(dp.reduce),
      Vp_(padded_vocab) {
  cfg_.validate();
  TT_CHECK(dp.zero == 0 || dp.zero == 1, "Llama: ZeRO-0 or ZeRO-1 (TrainOptions::validate refuses --zero)");
  TT_CHECK(reduce_dtype_ == DType::F32 || (reduce_dtype_ == DType::BF16 && backend.act_dtype() == DType::BF16),
           "Llama: gradients are summed in fp32, or in bf16 in bf16 runs (TrainOptions::validate refuses --reduce-dtype)");
  table_ = param_table(cfg_);
  buckets_ = update_ranges();
  updated_ahead_.assign(buckets_.size(), 0);
  int64_t at = 0;
  for (const ParamRange& b : buckets_) {
    bucket_split_.push_back(split_offsets(b.numel, world_));
    shard_at_.push_back(at);
    at += bucket_split_.back()[size_t(rank_) + 1] - bucket_split_.back()[size_t(rank_)];
  }
}

void ParamState::layout(Arena& a) {
  const DType M = be_.master_dtype(), A = be_.act_dtype();
  const int64_t Pp = padded_param_numel(cfg_, Vp_);
  params_ = a.take(Category::Parameters, M, Pp);
  params_act_ = A != M ? a.take(Category::Parameters, A, Pp) : Tensor{};
  grads_ = a.take(Category::Gradients, M, Pp);
  m_ = a.take(Category::OptimizerState, M, shard_numel());
  v_ = a.take(Category::OptimizerState, M, shard_numel());
  if (dp_ && reduce_dtype_ != M) {
    int64_t largest = 0;
    for (const ParamRange& b : buckets_) largest = std::max(largest, b.numel);
    reduce_scratch_ = a.take(Category::Gradients, reduce_dtype_, largest);
  }
  if (step_.norm_measured()) grad_sumsq_ = a.take(Category::Workspace, M, 1);
}

// The buckets, in the flat buffers' order: each layer's nine tensors (the last layer's with the
// final norm after them), then the embedding (and an untied head after it) in pieces no larger
// than the largest layer's bucket. Contiguous and in order, they cover the real parameters exactly
// (the padding rows that follow are not updated). The embedding's pieces are updated and, with
// ZeRO-1, gathered after the backward, one piece's gathering beside the next one's AdamW: at
// gpt2-small's vocabulary the table is 5.4 layers' worth, and the update of the whole table, then
// its gathering, were the step's last 275 us on two GPUs.
std::vector<ParamRange> ParamState::update_ranges() const {
  std::vector<ParamRange> ranges;
  int64_t largest = 1;
  for (int l = 0; l < cfg_.layers; ++l) {
    const ParamEntry& first = table_[size_t(l) * 9];
    const ParamEntry& last = table_[size_t(l) * 9 + (l + 1 == cfg_.layers ? 9 : 8)];
    ranges.push_back({first.offset, last.offset + last.numel - first.offset});
    largest = std::max(largest, ranges.back().numel);
  }
  const int64_t begin = table_[embedding_entry(cfg_)].offset, n = table_.back().offset + table_.back().numel - begin;
  const std::vector<int64_t> at = split_offsets(n, int((n + largest - 1) / largest));
  for (size_t i = 0; i + 1 < at.size(); ++i) ranges.push_back({begin + at[i], at[i + 1] - at[i]});
  return ranges;
}

int64_t ParamState::shard_numel() const {
  if (zero_ == 0) return cfg_.param_count();
  int64_t n = 0;
  for (const auto& split : bucket_split_) n += split[size_t(rank_) + 1] - split[size_t(rank_)];
  return n;
}

// Behind the backward, while the layers below run theirs (nothing below reads these parameters
// or gradients, and the step's end waits): the bucket's gradients summed over the ranks on the
// communication lane; with the update behind the backward, its AdamW on the update lane once the
// sum is there. With ZeRO-1 the updated parts are gathered on the communication lane after the
// next bucket's reduction is enqueued, so that no reduction waits for an update.
void ParamState::bucket_complete(size_t b, bool update_behind, bool summed_early) {
  if (dp_) {
    be_.begin_behind(Backend::Lane::Communication);
    if (!summed_early) reduce_bucket(b);
    if (pending_gather_ >= 0) {
      be_.follow(Backend::Lane::Update);
      gather_bucket(size_t(pending_gather_));
      pending_gather_ = -1;
    }
    be_.end_behind();
  }
  if (!update_behind) return;
  be_.begin_behind(Backend::Lane::Update);
  // Summed early, what the update waits for (complete_early_sum's addition) is ahead on this lane.
  if (dp_ && !summed_early) be_.follow(Backend::Lane::Communication);
  update_bucket(b);
  be_.end_behind();
  if (zero_ == 1) pending_gather_ = int(b);
}

void ParamState::update_ffn_ahead(int l) {
  TT_CHECK(!dp_ && l >= 0 && l < cfg_.layers, "update_ffn_ahead: one GPU, a layer's bucket");
  const ParamRange& r = buckets_[size_t(l)];
  const int64_t from = table_[size_t(l) * 9 + 5].offset, n = r.offset + r.numel - from;  // post_attention_layernorm on
  be_.begin_behind(Backend::Lane::Update);
  {
    ScopedRange range(be_, "optimizer");
    adamw_runs(from, n, from);
  }
  be_.end_behind();
  updated_ahead_[size_t(l)] = n;
}

void ParamState::reduce_early(size_t b) {
  TT_CHECK(dp_, "reduce_early: no ranks to sum over");
  be_.begin_behind(Backend::Lane::Communication);
  reduce_bucket(b);
  be_.end_behind();
}

void ParamState::complete_early_sum(const std::function<void()>& gather, const std::function<void()>& add) {
  TT_CHECK(dp_, "complete_early_sum: no ranks to sum over");
  be_.begin_behind(Backend::Lane::Communication);
  gather();
  be_.end_behind();
  be_.begin_behind(Backend::Lane::Update);
  be_.follow(Backend::Lane::Communication);
  add();
  be_.end_behind();
}

void ParamState::finish_behind() {
  if (pending_gather_ < 0) return;  // ZeRO-1 behind the backward: the last bucket's gathering
  be_.begin_behind(Backend::Lane::Communication);
  be_.follow(Backend::Lane::Update);
  gather_bucket(size_t(pending_gather_));
  be_.end_behind();
  pending_gather_ = -1;
}

// With a bf16 reduction the bucket goes through reduce_scratch_: converted, summed there, and
// the part this rank keeps (all of it without ZeRO-1) converted back into the fp32 gradients.
void ParamState::reduce_bucket(size_t b) {
  ScopedRange range(be_, "gradient_reduction");
  const ParamRange& r = buckets_[b];
  const Tensor grads = grads_.slice(r.offset, r.numel);
  const Tensor sum = reduce_scratch_.empty() ? grads : reduce_scratch_.slice(0, r.numel);
  if (sum.ptr != grads.ptr) be_.convert(sum, grads);
  if (zero_ == 0)
    comm_->all_reduce_sum(sum);
  else
    comm_->reduce_scatter_sum(sum, bucket_split_[b]);  // this rank's part of the sum, in place
  if (sum.ptr == grads.ptr) return;
  const std::vector<int64_t>& split = bucket_split_[b];
  const int64_t begin = zero_ == 0 ? 0 : split[size_t(rank_)], n = zero_ == 0 ? r.numel : split[size_t(rank_) + 1] - begin;
  if (n > 0) be_.convert(grads.slice(begin, n), sum.slice(begin, n));
}

void ParamState::update_bucket(size_t b) {
  ScopedRange range(be_, "optimizer");
  const ParamRange& r = buckets_[b];
  if (zero_ == 0) {
    const int64_t n = r.numel - updated_ahead_[b];
    updated_ahead_[b] = 0;
    return adamw_runs(r.offset, n, r.offset);
  }
  const std::vector<int64_t>& split = bucket_split_[b];
  const int64_t begin = r.offset + split[size_t(rank_)], n = split[size_t(rank_) + 1] - split[size_t(rank_)];
  if (n > 0) adamw_runs(begin, n, shard_at_[b]);
}

// The owner's AdamW wrote both its fp32 part and the part's bf16 copy: the products read the
// copy only, so in bf16 runs the ranks gather that (2 bytes an element, not 4) and the masters
// stay sharded until whole_params().
void ParamState::gather_bucket(size_t b) {
  if (zero_ == 0) return;
  ScopedRange range(be_, "parameter_gather");
  const ParamRange& r = buckets_[b];
  if (params_act_.empty()) return comm_->all_gather(params_.slice(r.offset, r.numel), bucket_split_[b]);
  comm_->all_gather(params_act_.slice(r.offset, r.numel), bucket_split_[b]);
}

const Tensor& ParamState::whole_params() {
  if (!masters_whole_)
    for (size_t b = 0; b < buckets_.size(); ++b)
      comm_->all_gather(params_.slice(buckets_[b].offset, buckets_[b].numel), bucket_split_[b]);
  masters_whole_ = true;
  return params_;
}

void ParamState::update() {
  if (dp_) {  // bucket by bucket, as they were reduced
    for (size_t b = 0; b < buckets_.size(); ++b) update_bucket(b), gather_bucket(b);
    return;
  }
  ScopedRange range(be_, "optimizer");
  if (be_.plan().fused_adamw) {  // one launch over all the real parameters (a run each of decay), not the padding
    adamw_runs(0, cfg_.param_count(), 0);
    return;
  }
  for (const ParamEntry& e : table_) {  // one parameter tensor at a time, like torch's AdamW
    const Tensor act = params_act_.empty() ? Tensor{} : params_act_.slice(e.offset, e.numel);
    be_.adamw(params_.slice(e.offset, e.numel), grads_.slice(e.offset, e.numel), m_.slice(e.offset, e.numel),
              v_.slice(e.offset, e.numel), act, decays(e), clip_sumsq());
  }
}

bool ParamState::decays(const ParamEntry& e) const {
  if (e.shape.size() == 1) return step_.decay_norms;  // the RMSNorm gains are the 1-D tensors
  if (&e == &table_[embedding_entry(cfg_)]) return step_.decay_embedding;
  return true;
}

void ParamState::adamw_runs(int64_t offset, int64_t n, int64_t m_at) {
  auto entry_at = [&](int64_t i) {  // the tensor that holds element i
    return std::upper_bound(table_.begin(), table_.end(), i, [](int64_t x, const ParamEntry& e) { return x < e.offset; }) - 1;
  };
  for (int64_t at = offset; at < offset + n;) {
    auto e = entry_at(at);
    const bool decay = decays(*e);
    int64_t end = e->offset + e->numel;
    for (++e; e != table_.end() && end < offset + n && decays(*e) == decay; ++e) end = e->offset + e->numel;
    end = std::min(end, offset + n);
    const int64_t k = end - at, mk = m_at + (at - offset);
    be_.adamw(params_.slice(at, k), grads_.slice(at, k), m_.slice(mk, k), v_.slice(mk, k),
              params_act_.empty() ? Tensor{} : params_act_.slice(at, k), decay, clip_sumsq());
    at = end;
  }
}

// After the reductions: every gradient's square summed, on each rank over all of them (each
// holds the whole sum), or with ZeRO-1 over its own parts, then over the ranks.
void ParamState::measure_grad_norm() {
  ScopedRange range(be_, "grad_norm");
  if (zero_ == 0) {
    be_.sum_squares(grad_sumsq_, grads_.slice(0, cfg_.param_count()), false);
    return;
  }
  bool first = true;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::vector<int64_t>& split = bucket_split_[b];
    const int64_t n = split[size_t(rank_) + 1] - split[size_t(rank_)];
    if (n == 0) continue;
    be_.sum_squares(grad_sumsq_, grads_.slice(buckets_[b].offset + split[size_t(rank_)], n), !first);
    first = false;
  }
  if (first) be_.zero(grad_sumsq_);
  comm_->all_reduce_sum(grad_sumsq_);
}

double ParamState::grad_norm() {
  TT_CHECK(step_.norm_measured(), "grad_norm: measured with StepOptions::clip or measure_norm only");
  return std::sqrt(read(grad_sumsq_)[0]);
}

Tensor ParamState::optimizer_state(int which) {
  TT_CHECK(which == 1 || which == 2, "optimizer_state: 1 (first moment) or 2 (second)");
  const Tensor& state = which == 1 ? m_ : v_;
  if (zero_ == 0) return state;
  for (size_t b = 0; b < buckets_.size(); ++b) {  // each rank's parts into place, then gathered
    const std::vector<int64_t>& split = bucket_split_[b];
    const int64_t n = split[size_t(rank_) + 1] - split[size_t(rank_)];
    const Tensor bucket = grads_.slice(buckets_[b].offset, buckets_[b].numel);
    if (n > 0) be_.convert(bucket.slice(split[size_t(rank_)], n), state.slice(shard_at_[b], n));
    comm_->all_gather(bucket, split);
  }
  return grads_.slice(0, cfg_.param_count());
}

void ParamState::load_optimizer_state(int which, int64_t offset, const std::vector<float>& values) {
  const Tensor& state = which == 1 ? m_ : v_;
  if (zero_ == 0) return write(state.slice(offset, int64_t(values.size())), values);
  for (size_t b = 0; b < buckets_.size(); ++b) {  // the overlap of the tensor with this rank's part of each bucket
    const int64_t part = buckets_[b].offset + bucket_split_[b][size_t(rank_)];
    const int64_t n = bucket_split_[b][size_t(rank_) + 1] - bucket_split_[b][size_t(rank_)];
    const int64_t lo = std::max(part, offset), hi = std::min(part + n, offset + int64_t(values.size()));
    if (lo < hi)
      write(state.slice(shard_at_[b] + (lo - part), hi - lo),
            std::vector<float>(values.begin() + (lo - offset), values.begin() + (hi - offset)));
  }
}

std::vector<double> ParamState::read(const Tensor& t) {
  if (t.dtype == DType::F64) {
    std::vector<double> out(size_t(t.numel));
    be_.download(out.data(), t);
    return out;
  }
  const std::vector<float> f = read_f32(t);
  return std::vector<double>(f.begin(), f.end());
}

std::vector<float> ParamState::read_f32(const Tensor& t) {
  std::vector<float> out(size_t(t.numel));
  if (t.dtype == DType::F32) {
    be_.download(out.data(), t);
  } else if (t.dtype == DType::BF16) {
    std::vector<bf16> h(size_t(t.numel));
    be_.download(h.data(), t);
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_float(h[i]);
  } else {
    std::vector<double> d(size_t(t.numel));
    be_.download(d.data(), t);
    for (size_t i = 0; i < d.size(); ++i) out[i] = float(d[i]);
  }
  return out;
}

void ParamState::take_rank0_params() {
  if (!dp_ || world_ == 1) return;
  if (rank_ != 0) be_.zero(params_);
  comm_->all_reduce_sum(params_);
  if (!params_act_.empty()) be_.convert(params_act_, params_);
}

void ParamState::write(const Tensor& t, const std::vector<float>& values) {
  TT_CHECK(int64_t(values.size()) == t.numel, "write: size mismatch");
  if (t.dtype == DType::F32) {
    be_.upload(t, values.data());
  } else {
    const std::vector<double> d(values.begin(), values.end());
    be_.upload(t, d.data());
  }
  // A write into the parameters (all of them, or one tensor's range) refreshes that range of
  // the act-typed copy the products read.
  const char* base = static_cast<const char*>(params_.ptr);
  const char* at = static_cast<const char*>(t.ptr);
  if (!params_act_.empty() && at >= base && at < base + params_.bytes()) {
    const int64_t offset = (at - base) / int64_t(dtype_size(params_.dtype));
    be_.convert(params_act_.slice(offset, t.numel), params_.slice(offset, t.numel));
  }
}

}  // namespace tt

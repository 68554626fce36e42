// cuDNN fused flash attention through the backend API (see attention.h). The forward graph:
//   S = Q K^T;  S *= scale;  mask: keep S where row >= column, else -inf;
//   M = rowmax(S);  E = exp(S - M);  Z = rowsum(E);  stats = M + log Z;  P = E / Z (bf16);  O = P V
// The backward graph recomputes P = exp(S * scale - stats) under the same mask and forms
//   dV = P^T dO;  dP = dO V^T;  dS = P (dP - rowsum(dO * O)) * scale;  dK = dS^T Q;  dQ = dS K
// with grouped key/value heads summed by a reduction over the query heads of each group, and
// dQ accumulated in fp32 before it is rounded to bf16. cuDNN fuses each graph into one or two
// kernels compiled at plan time; the plans are built once per shape.
#include <cudnn.h>

#include <cmath>
#include <limits>

#include "core/cuda_check.h"
#include "ops/attention.h"

namespace tt::cuda {
namespace {

#define CUDNN_CHECK(call)                                                                                   \
  do {                                                                                                      \
    const cudnnStatus_t st_ = (call);                                                                       \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                                                      \
      char msg_[512] = "";                                                                                  \
      cudnnGetLastErrorString(msg_, sizeof msg_);                                                           \
      fail(std::string(#call) + " failed: " + cudnnGetErrorString(st_) + (msg_[0] ? std::string(": ") + msg_ : "")); \
    }                                                                                                       \
  } while (0)

using Desc = cudnnBackendDescriptor_t;

// The tensors the caller provides (unique ids in the variant pack).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kMaskValue, kDO, kDQ, kDK, kDV, kOne, kSoftmaxSum, kDQAccum };

// Owns every descriptor of one graph; they live as long as its plan.
class Graph {
 public:
  ~Graph() {
    for (Desc d : all_) cudnnBackendDestroyDescriptor(d);
  }
  Desc make(cudnnBackendDescriptorType_t type) {
    Desc d = nullptr;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d));
    all_.push_back(d);
    return d;
  }
  template <class T>
  static void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
                  int64_t count = 1) {
    CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, count, values));
  }
  static void set_desc(Desc d, cudnnBackendAttributeName_t name, Desc value) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &value);
  }

  Desc tensor(int64_t uid, cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides,
              bool is_virtual = false, bool by_value = false) {
    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    const bool yes = true;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), int64_t(dims.size()));
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), int64_t(strides.size()));
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    if (is_virtual) set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes);
    if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes);
    CUDNN_CHECK(cudnnBackendFinalize(t));
    return t;
  }
  // An intermediate of the graph (never in memory).
  Desc temp(cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides) {
    return tensor(next_virtual_++, type, std::move(dims), std::move(strides), true);
  }
  // A host scalar passed by value, of rank 4 like the tensors it combines with.
  Desc scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    CUDNN_CHECK(cudnnBackendFinalize(pw));
    Desc op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    CUDNN_CHECK(cudnnBackendFinalize(op));
    ops_.push_back(op);
  }
  void matmul(Desc a, Desc b, Desc c) {
    Desc mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    CUDNN_CHECK(cudnnBackendFinalize(mm));
    Desc op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    CUDNN_CHECK(cudnnBackendFinalize(op));
    ops_.push_back(op);
  }
  void reduction(cudnnReduceTensorOp_t mode, Desc x, Desc y) {
    Desc rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode);
    CUDNN_CHECK(cudnnBackendFinalize(rd));
    Desc op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    CUDNN_CHECK(cudnnBackendFinalize(op));
    ops_.push_back(op);
  }
  void reshape(Desc x, Desc y) {
    Desc op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    CUDNN_CHECK(cudnnBackendFinalize(op));
    ops_.push_back(op);
  }

  // Operation graph, heuristics, and the first engine configuration whose plan builds.
  Desc finalize(cudnnHandle_t handle, int64_t* workspace) {
    Desc graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(), int64_t(ops_.size()));
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    CUDNN_CHECK(cudnnBackendFinalize(graph));
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
      set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
      if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) continue;
      int64_t count = 0;
      CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                           &count, nullptr));
      std::vector<Desc> configs(static_cast<size_t>(count));
      for (Desc& c : configs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                           &count, configs.data()));
      for (int64_t i = 0; i < count; ++i) {
        Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
        set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[size_t(i)]);
        if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) continue;
        CUDNN_CHECK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             nullptr, workspace));
        return plan;
      }
    }
    char msg[512] = "";
    cudnnGetLastErrorString(msg, sizeof msg);
    fail(std::string("cuDNN has no engine for this attention graph (") + msg + ")");
  }

 private:
  std::vector<Desc> all_, ops_;
  int64_t next_virtual_ = 1000;
};

int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

// The layouts: tensors are [b, h, s, d] views of the token-major buffers.
struct Layout {
  int64_t B, T, H, KVH, D, ld;
  explicit Layout(const AttnShape& s) : B(s.B), T(s.T), H(s.H), KVH(s.KVH), D(s.D), ld(s.ld()) {}
  std::vector<int64_t> qkv_strides() const { return {T * ld, D, ld, 1}; }
  std::vector<int64_t> qkv_transposed() const { return {T * ld, D, 1, ld}; }  // dims [b, h, d, s]
  std::vector<int64_t> out_strides() const { return {T * H * D, D, H * D, 1}; }
  std::vector<int64_t> scores() const { return {B, H, T, T}; }
  std::vector<int64_t> scores_strides() const { return {H * T * T, T * T, T, 1}; }
  std::vector<int64_t> rows() const { return {B, H, T, 1}; }
  std::vector<int64_t> rows_strides() const { return {H * T, T, 1, 1}; }
  // Bytes the backward keeps beside its plan: the rowsum(dO * O) and the fp32 dQ accumulator.
  int64_t softmax_sum_bytes() const { return align16(B * H * T * 4); }
  int64_t dq_accum_bytes() const { return align16(B * H * T * D * 4); }
};

// Applies the causal mask of the graph to S (fp32 [b, h, s, s]), returning the masked tensor.
Desc causal_mask(Graph& g, const Layout& L, Desc s) {
  const auto dims = L.scores(), strides = L.scores_strides();
  Desc row = g.temp(CUDNN_DATA_INT32, dims, strides), col = g.temp(CUDNN_DATA_INT32, dims, strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
  Desc keep = g.temp(CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
  Desc masked = g.temp(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, g.scalar(kMaskValue), keep, masked);  // keep ? s : -inf
  return masked;
}

}  // namespace

struct CudnnAttention::Plan {
  AttnShape shape;
  bool backward;
  Graph graph;
  Desc plan = nullptr;
  int64_t plan_workspace = 0;
};

CudnnAttention::CudnnAttention(Stream stream) {
  cudnnHandle_t h = nullptr;
  CUDNN_CHECK(cudnnCreate(&h));
  handle_ = h;
  CUDNN_CHECK(cudnnSetStream(h, stream.handle));
}

CudnnAttention::~CudnnAttention() {
  plans_.clear();
  if (handle_) cudnnDestroy(handle_);
}

std::string CudnnAttention::version() {
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

int64_t CudnnAttention::workspace_bytes(const AttnShape& s) {
  const Layout L(s);
  // The backward plan's own workspace holds, for grouped heads, dK and dV of every query head
  // in bf16 before their reduction; 1 MiB covers the rest.
  const int64_t plan = (s.KVH != s.H ? 2 * L.B * L.H * L.T * L.D * 2 : 0) + (int64_t(1) << 20);
  return L.softmax_sum_bytes() + L.dq_accum_bytes() + plan;
}

CudnnAttention::Plan& CudnnAttention::plan(const AttnShape& s, bool backward) {
  for (auto& p : plans_)
    if (p->backward == backward && p->shape.B == s.B && p->shape.T == s.T && p->shape.H == s.H &&
        p->shape.KVH == s.KVH && p->shape.D == s.D)
      return *p;
  if (s.D % 8 != 0 || s.D > 256) fail("cuDNN flash attention needs a head size that is a multiple of 8, at most 256");
  if (backward && s.T == 1) fail("cuDNN flash attention has no backward for a sequence of 1");
  auto p = std::make_unique<Plan>();
  p->shape = s;
  p->backward = backward;
  Graph& g = p->graph;
  const Layout L(s);
  const auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const auto S = L.scores(), Ss = L.scores_strides(), R = L.rows(), Rs = L.rows_strides();
  Desc q = g.tensor(kQ, bf16, {L.B, L.H, L.T, L.D}, L.qkv_strides());
  Desc kt = g.tensor(kK, bf16, {L.B, L.KVH, L.D, L.T}, L.qkv_transposed());
  Desc o = g.tensor(kO, bf16, {L.B, L.H, L.T, L.D}, L.out_strides());
  Desc stats = g.tensor(kStats, f32, R, Rs);
  Desc scale = g.scalar(kScale);
  Desc s0 = g.temp(f32, S, Ss), s1 = g.temp(f32, S, Ss);
  g.matmul(q, kt, s0);
  g.pointwise(CUDNN_POINTWISE_MUL, s0, scale, nullptr, s1);
  if (!backward) {
    Desc v = g.tensor(kV, bf16, {L.B, L.KVH, L.T, L.D}, L.qkv_strides());
    Desc masked = causal_mask(g, L, s1);
    Desc mx = g.temp(f32, R, Rs), shifted = g.temp(f32, S, Ss), e = g.temp(f32, S, Ss);
    Desc z = g.temp(f32, R, Rs), logz = g.temp(f32, R, Rs), probs = g.temp(bf16, S, Ss);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, mx);
    g.pointwise(CUDNN_POINTWISE_SUB, masked, mx, nullptr, shifted);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
    g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, logz);
    g.pointwise(CUDNN_POINTWISE_ADD, mx, logz, nullptr, stats);
    g.pointwise(CUDNN_POINTWISE_DIV, e, z, nullptr, probs);  // the second product reads bf16
    g.matmul(probs, v, o);
  } else {
    const bool grouped = L.KVH != L.H;
    const std::vector<int64_t> full{L.B, L.H, L.T, L.D}, full_strides{L.H * L.T * L.D, L.T * L.D, L.D, 1};
    const std::vector<int64_t> transposed_strides{L.H * L.T * L.T, L.T * L.T, 1, L.T};
    Desc vt = g.tensor(kV, bf16, {L.B, L.KVH, L.D, L.T}, L.qkv_transposed());
    Desc d_o = g.tensor(kDO, bf16, full, L.out_strides());
    Desc dq = g.tensor(kDQ, bf16, full, L.qkv_strides());
    Desc dk = g.tensor(kDK, bf16, {L.B, L.KVH, L.T, L.D}, L.qkv_strides());
    Desc dv = g.tensor(kDV, bf16, {L.B, L.KVH, L.T, L.D}, L.qkv_strides());
    Desc softmax_sum = g.tensor(kSoftmaxSum, f32, R, Rs);
    Desc dq_accum = g.tensor(kDQAccum, f32, full, full_strides);
    // rowsum(dO * O)
    Desc d_o_o = g.temp(f32, full, full_strides), rowsum = g.temp(f32, R, Rs);
    g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, nullptr, d_o_o);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, rowsum);
    g.pointwise(CUDNN_POINTWISE_MUL, rowsum, g.scalar(kOne), nullptr, softmax_sum);
    // P = exp(S * scale - stats), masked
    Desc s2 = g.temp(f32, S, Ss);
    g.pointwise(CUDNN_POINTWISE_SUB, s1, stats, nullptr, s2);
    Desc masked = causal_mask(g, L, s2);
    Desc probs = g.temp(f32, S, Ss), probs_t = g.temp(bf16, {L.B, L.H, L.T, L.T}, transposed_strides);
    g.pointwise(CUDNN_POINTWISE_EXP, masked, nullptr, nullptr, probs);
    g.reshape(probs, probs_t);
    // dV = P^T dO (per query head, then summed over the group)
    Desc dv_full = grouped ? g.temp(bf16, full, full_strides) : dv;
    g.matmul(probs_t, d_o, dv_full);
    if (grouped) g.reduction(CUDNN_REDUCE_TENSOR_ADD, dv_full, dv);
    // dS = P * (dO V^T - rowsum) * scale
    Desc dp = g.temp(f32, S, Ss), t3 = g.temp(f32, S, Ss), t4 = g.temp(f32, S, Ss), ds = g.temp(f32, S, Ss);
    g.matmul(d_o, vt, dp);
    g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, nullptr, t3);
    g.pointwise(CUDNN_POINTWISE_MUL, t3, probs, nullptr, t4);
    g.pointwise(CUDNN_POINTWISE_MUL, t4, scale, nullptr, ds);
    // dK = dS^T Q (summed over the group); dQ = dS K, accumulated in fp32
    Desc ds_t = g.temp(bf16, {L.B, L.H, L.T, L.T}, transposed_strides);
    g.reshape(ds, ds_t);
    Desc dk_full = grouped ? g.temp(bf16, full, full_strides) : dk;
    g.matmul(ds_t, q, dk_full);
    if (grouped) g.reduction(CUDNN_REDUCE_TENSOR_ADD, dk_full, dk);
    Desc k_view = g.temp(f32, {L.B, L.KVH, L.T, L.D}, L.qkv_strides());
    g.reshape(kt, k_view);
    g.matmul(ds, k_view, dq_accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
  }
  p->plan = g.finalize(handle_, &p->plan_workspace);
  plans_.push_back(std::move(p));
  return *plans_.back();
}

void CudnnAttention::prepare(const AttnShape& s, const Tensor& workspace) {
  const Layout L(s);
  const int64_t fwd = plan(s, false).plan_workspace;
  const int64_t bwd = L.softmax_sum_bytes() + L.dq_accum_bytes() + (s.T > 1 ? plan(s, true).plan_workspace : 0);
  if (int64_t(workspace.bytes()) < std::max(fwd, bwd))
    fail("cuDNN attention needs " + std::to_string(std::max(fwd, bwd)) + " bytes of workspace, " +
         std::to_string(workspace.bytes()) + " were reserved");
}

namespace {

void execute(cudnnHandle_t handle, Desc plan, void* workspace, std::vector<int64_t> uids, std::vector<void*> ptrs) {
  Desc pack = nullptr;
  CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  const cudnnStatus_t st = [&] {
    cudnnStatus_t r = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (r == CUDNN_STATUS_SUCCESS)
      r = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
                                   ptrs.data());
    if (r == CUDNN_STATUS_SUCCESS)
      r = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()),
                                   uids.data());
    if (r == CUDNN_STATUS_SUCCESS) r = cudnnBackendFinalize(pack);
    if (r == CUDNN_STATUS_SUCCESS) r = cudnnBackendExecute(handle, plan, pack);
    return r;
  }();
  cudnnBackendDestroyDescriptor(pack);
  CUDNN_CHECK(st);
}

char* at(const Tensor& t, int64_t elements) { return static_cast<char*>(t.ptr) + elements * int64_t(dtype_size(t.dtype)); }

// The masking value: -inf from cuDNN 9.10 on, the lowest finite float before.
float mask_value() {
  return cudnnGetVersion() >= 91000 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
}

}  // namespace

void CudnnAttention::forward(const Tensor& att, const Tensor& stats, const Tensor& qkv, const AttnShape& s,
                             const Tensor& workspace) {
  TT_CHECK(qkv.dtype == DType::BF16 && att.dtype == DType::BF16 && stats.dtype == DType::F32,
           "cuDNN attention takes bf16 tensors and fp32 statistics");
  Plan& p = plan(s, false);
  float scale = float(s.scale()), masked = mask_value();
  execute(static_cast<cudnnHandle_t>(handle_), p.plan, workspace.ptr,
          {kQ, kK, kV, kO, kStats, kScale, kMaskValue},
          {qkv.ptr, at(qkv, s.k_col()), at(qkv, s.v_col()), att.ptr, stats.ptr, &scale, &masked});
}

void CudnnAttention::backward(const Tensor& dqkv, const Tensor& datt, const Tensor& qkv, const Tensor& att,
                              const Tensor& stats, const AttnShape& s, const Tensor& workspace) {
  Plan& p = plan(s, true);
  const Layout L(s);
  float scale = float(s.scale()), masked = mask_value(), one = 1.0f;
  char* ws = static_cast<char*>(workspace.ptr);
  execute(static_cast<cudnnHandle_t>(handle_), p.plan, ws + L.softmax_sum_bytes() + L.dq_accum_bytes(),
          {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kMaskValue, kOne, kSoftmaxSum, kDQAccum},
          {qkv.ptr, at(qkv, s.k_col()), at(qkv, s.v_col()), att.ptr, datt.ptr, stats.ptr, dqkv.ptr, at(dqkv, s.k_col()),
           at(dqkv, s.v_col()), &scale, &masked, &one, ws, ws + L.softmax_sum_bytes()});
}

}  // namespace tt::cuda

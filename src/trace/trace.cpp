#include "trace/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>

namespace tt {

std::vector<double> added_us(const TraceData& t) {
  std::vector<size_t> order(t.records.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.records[a].start_ns < t.records[b].start_ns; });
  std::vector<double> us(t.records.size(), 0.0);
  std::map<uint32_t, uint64_t> busy_until;  // per stream
  for (size_t i : order) {
    const TraceRecord& r = t.records[i];
    uint64_t& until = busy_until[r.stream];
    const uint64_t from = std::max(r.start_ns, until);
    if (r.end_ns > from) us[i] = double(r.end_ns - from) / 1e3;
    until = std::max(until, r.end_ns);
  }
  return us;
}

namespace {

using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;  // [start, end), ns

// The union of intervals, as disjoint intervals in order.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [a, b] : v) {
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

uint64_t measure(const Intervals& v) {
  uint64_t n = 0;
  for (const auto& [a, b] : v) n += b - a;
  return n;
}

// The measure of the intersection of two unions (each merged).
uint64_t overlap(const Intervals& x, const Intervals& y) {
  uint64_t n = 0;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    const uint64_t a = std::max(x[i].first, y[j].first), b = std::min(x[i].second, y[j].second);
    if (b > a) n += b - a;
    (x[i].second < y[j].second ? i : j)++;
  }
  return n;
}

// The optimizer's records: a region named "optimizer" at any level of its path, the update after
// the backward ("optimizer") or a bucket's update behind it, inside its layer's range
// ("backward/layer.3/optimizer").
bool in_optimizer(const std::string& path) {
  for (size_t at = 0;;) {
    const size_t cut = path.find('/', at);
    if (path.compare(at, cut == std::string::npos ? std::string::npos : cut - at, "optimizer") == 0) return true;
    if (cut == std::string::npos) return false;
    at = cut + 1;
  }
}

}  // namespace

std::vector<StepAccount> step_accounts(const TraceData& t) {
  const std::vector<double> added = added_us(t);
  std::vector<StepAccount> steps(size_t(std::max(t.steps, 0)));
  for (int s = 0; s < t.steps; ++s) {
    StepAccount& a = steps[size_t(s)];
    Intervals all, optimizer, rest;
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < t.records.size(); ++i) {
      const TraceRecord& r = t.records[i];
      if (r.step != s || r.kind == TraceRecord::Memcpy) continue;
      a.kernel_us += added[i];
      first = std::min(first, r.start_ns), last = std::max(last, r.end_ns);
      all.emplace_back(r.start_ns, r.end_ns);
      (r.region >= 0 && in_optimizer(t.regions[size_t(r.region)]) ? optimizer : rest).emplace_back(r.start_ns, r.end_ns);
    }
    if (all.empty()) continue;
    all = merged(all), optimizer = merged(optimizer), rest = merged(rest);
    a.window_us = double(last - first) / 1e3;
    a.busy_us = double(measure(all)) / 1e3;
    a.idle_us = a.window_us - a.busy_us;
    a.concurrent_us = std::max(0.0, a.kernel_us - a.busy_us);  // (never -0.000 from rounding)
    a.optimizer_alone_us = double(measure(optimizer) - overlap(optimizer, rest)) / 1e3;
  }
  return steps;
}

int resident_blocks(const TraceRecord& r, const SmLimits& sm) {
  const int64_t threads = int64_t(r.block[0]) * r.block[1] * r.block[2];
  const int64_t warps = std::max<int64_t>(1, (threads + 31) / 32);
  int64_t blocks = sm.blocks > 0 ? sm.blocks : INT64_MAX;
  if (sm.threads > 0) blocks = std::min(blocks, sm.threads / 32 / warps);
  const int64_t warp_registers = (int64_t(r.registers) * 32 + 255) / 256 * 256;
  if (sm.registers > 0 && warp_registers > 0)  // each of the SM's four partitions holds whole warps' registers
    blocks = std::min(blocks, sm.registers / 4 / warp_registers * 4 / warps);
  const int64_t shared = (int64_t(r.static_smem) + r.dynamic_smem + sm.reserved_shared_bytes + 127) / 128 * 128;
  if (sm.shared_bytes > 0 && shared > 0) blocks = std::min(blocks, sm.shared_bytes / shared);
  return int(std::clamp<int64_t>(blocks, 1, INT32_MAX));
}

double waves(const TraceRecord& r, const SmLimits& sm) {
  const double blocks = double(r.grid[0]) * r.grid[1] * r.grid[2];
  return blocks / (double(std::max(sm.sms, 1)) * resident_blocks(r, sm));
}

WaveAccount wave_account(const TraceData& t, const SmLimits& sm) {
  const std::vector<double> added = added_us(t);
  WaveAccount a;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const TraceRecord& r = t.records[i];
    if (r.kind != TraceRecord::Kernel) continue;
    const double w = waves(r, sm), us = added[i];
    (w < 1 ? a.under_one_us : w < 2 ? a.one_to_two_us : a.two_or_more_us) += us;
    if (w > 0) a.partial_wave_idle_us += us * (1 - w / std::ceil(w));
  }
  const double steps = std::max(t.steps, 1);
  for (double* x : {&a.under_one_us, &a.one_to_two_us, &a.two_or_more_us, &a.partial_wave_idle_us}) *x /= steps;
  return a;
}

std::vector<HotspotRow> hotspots(const TraceData& t, const SmLimits& sm) {
  const std::vector<double> added = added_us(t);
  std::map<std::string, HotspotRow> by_name;
  double total = 0;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const TraceRecord& r = t.records[i];
    HotspotRow& h = by_name[r.name];
    const double us = added[i];
    if (h.calls == 0) h.name = r.name, h.min_us = us, h.max_us = us;
    h.calls += 1;
    h.total_us += us;
    h.min_us = std::min(h.min_us, us);
    h.max_us = std::max(h.max_us, us);
    if (sm.sms > 0 && r.kind == TraceRecord::Kernel) h.waves += waves(r, sm);  // summed here, the mean below
    total += us;
  }
  std::vector<HotspotRow> rows;
  for (auto& [name, h] : by_name) {
    h.mean_us = h.total_us / double(h.calls);
    h.waves /= double(h.calls);
    h.share = total > 0 ? h.total_us / total : 0;
    rows.push_back(h);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const HotspotRow& a, const HotspotRow& b) { return a.total_us > b.total_us; });
  return rows;
}

namespace {

// A fused attention kernel: ours, or cuDNN's.
bool is_fused_attention(const std::string& name) {
  return name.rfind("flash_", 0) == 0 || name.find("sdpa") != std::string::npos || name.find("fmha") != std::string::npos;
}

}  // namespace

std::string kernel_family(const std::string& name) {
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  const auto starts = [&](const char* s) { return name.rfind(s, 0) == 0; };
  if (starts("nvjet") || starts("sm90_xmma") || starts("cutlass") || has("gemm"))
    return starts("nvjet_sm90_qq") || has("e4m3") ? "FP8 products" : "products";
  if (is_fused_attention(name) || starts("causal_softmax") || starts("heads_kernel")) return "attention";
  if (has("SwiGlu") || starts("swiglu") || starts("silu")) return "SwiGLU";
  if (has("RopeGradient")) return "RoPE";
  if (has("SoftmaxGradient")) return "cross-entropy";
  if (starts("quantize_kernel") || starts("amax_partials_kernel") || starts("update_scales")) return "quantizing passes";
  if (starts("rms")) return "RMSNorm";
  if (starts("rope")) return "RoPE";
  if (starts("cross_entropy") || has("classifier")) return "cross-entropy";
  if (starts("adamw")) return "AdamW";
  if (starts("memcpy") || starts("memset")) return "copies and fills";
  return "other";
}

std::vector<FamilyRow> kernel_families(const TraceData& t) {
  const std::vector<double> added = added_us(t);
  std::map<std::string, FamilyRow> by;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const std::string family = kernel_family(t.records[i].name);
    FamilyRow& f = by[family];
    f.family = family;
    f.calls += 1;
    f.total_us += added[i];
  }
  std::vector<FamilyRow> rows;
  for (auto& [name, f] : by) rows.push_back(f);
  std::stable_sort(rows.begin(), rows.end(), [](const FamilyRow& a, const FamilyRow& b) { return a.total_us > b.total_us; });
  return rows;
}

bool has_fused_attention(const TraceData& t) {
  return std::any_of(t.records.begin(), t.records.end(), [](const TraceRecord& r) { return is_fused_attention(r.name); });
}

std::vector<RegionRow> region_times(const TraceData& t) {
  const std::vector<double> added = added_us(t);
  std::vector<RegionRow> rows;
  std::vector<int> row_of(t.regions.size() + 1, -1);  // slot 0: outside any range
  double total = 0;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const TraceRecord& r = t.records[i];
    int& slot = row_of[size_t(r.region + 1)];
    if (slot < 0) {
      slot = int(rows.size());
      rows.push_back({r.region >= 0 ? t.regions[size_t(r.region)] : "(outside any range)", 0, 0, 0});
    }
    rows[size_t(slot)].kernels += r.kind == TraceRecord::Kernel;
    rows[size_t(slot)].gpu_us += added[i];
    total += added[i];
  }
  for (RegionRow& row : rows) row.share = total > 0 ? row.gpu_us / total : 0;
  return rows;
}

std::vector<int64_t> launches_per_step(const TraceData& t) {
  std::vector<int64_t> n(size_t(t.steps), 0);
  for (const TraceRecord& r : t.records)
    if (r.kind == TraceRecord::Kernel && r.step >= 0 && r.step < t.steps) n[size_t(r.step)]++;
  return n;
}

void write_chrome_trace(std::ostream& out, const TraceData& t) {
  using json = nlohmann::json;
  uint64_t t0 = UINT64_MAX;
  for (const TraceRecord& r : t.records) t0 = std::min(t0, r.start_ns);
  auto us = [&](uint64_t ns) { return double(ns - t0) / 1e3; };
  static const char* kinds[] = {"kernel", "memcpy", "memset"};
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "GPU"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 1}, {"args", {{"name", "kernels"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 2}, {"args", {{"name", "model regions"}}}});
  for (const TraceRecord& r : t.records) {
    json args = {{"step", r.step}, {"stream", r.stream}, {"region", r.region >= 0 ? t.regions[size_t(r.region)] : ""}};
    if (r.kind == TraceRecord::Kernel) {
      args["grid"] = {r.grid[0], r.grid[1], r.grid[2]};
      args["block"] = {r.block[0], r.block[1], r.block[2]};
      args["registers"] = r.registers;
      args["shared_memory"] = r.static_smem + r.dynamic_smem;
    } else {
      args["bytes"] = r.bytes;
    }
    events.push_back({{"name", r.name}, {"cat", kinds[r.kind]}, {"ph", "X"}, {"pid", 0}, {"tid", 1},
                      {"ts", us(r.start_ns)}, {"dur", r.duration_us()}, {"args", args}});
  }
  // Each range of each step spans the records inside it (its own and its children's).
  std::map<std::pair<int, std::string>, std::pair<uint64_t, uint64_t>> spans;
  for (const TraceRecord& r : t.records) {
    if (r.region < 0) continue;
    const std::string& path = t.regions[size_t(r.region)];
    for (size_t cut = path.find('/'); ; cut = path.find('/', cut + 1)) {
      const std::string prefix = cut == std::string::npos ? path : path.substr(0, cut);
      auto it = spans.find({r.step, prefix});
      if (it == spans.end())
        spans[{r.step, prefix}] = {r.start_ns, r.end_ns};
      else
        it->second = {std::min(it->second.first, r.start_ns), std::max(it->second.second, r.end_ns)};
      if (cut == std::string::npos) break;
    }
  }
  for (const auto& [key, span] : spans) {
    const std::string& path = key.second;
    const size_t slash = path.rfind('/');
    events.push_back({{"name", slash == std::string::npos ? path : path.substr(slash + 1)},
                      {"cat", "region"}, {"ph", "X"}, {"pid", 0}, {"tid", 2}, {"ts", us(span.first)},
                      {"dur", double(span.second - span.first) / 1e3},
                      {"args", {{"path", path}, {"step", key.first}}}});
  }
  out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

static std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void write_kernels_csv(std::ostream& out, const std::vector<HotspotRow>& rows) {
  out << "kernel,calls,total_us,mean_us,min_us,max_us,share\n";
  for (const HotspotRow& h : rows)
    out << fmt::format("{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.5f}\n", csv_field(h.name), h.calls, h.total_us, h.mean_us,
                       h.min_us, h.max_us, h.share);
}

void write_regions_csv(std::ostream& out, const std::vector<RegionRow>& rows) {
  out << "region,kernels,gpu_us,share\n";
  for (const RegionRow& r : rows)
    out << fmt::format("{},{},{:.3f},{:.5f}\n", csv_field(r.path), r.kernels, r.gpu_us, r.share);
}

std::string short_kernel_name(const std::string& demangled) {
  std::string s = demangled;
  for (const char* drop : {"(anonymous namespace)::", "tt::cuda::"})
    for (size_t p; (p = s.find(drop)) != std::string::npos;) s.erase(p, std::string(drop).size());
  // Drop the argument list: the first '(' outside template brackets.
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') depth++;
    else if (s[i] == '>') depth--;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  return s;
}

}  // namespace tt

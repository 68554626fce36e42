#!/usr/bin/env python3
"""Writes a patch (argv[2]) of block_backward.cu (argv[1]) that records each task's times, and of
cuda_backend.cpp (argv[3]) that runs the operations one by one under TT_ONE_BY_ONE: a measurement."""
import os, subprocess, sys, tempfile
src = open(sys.argv[1]).read(); s = src
def rep(a, b):
    global s
    assert a in s, a[:80]
    s = s.replace(a, b, 1)
rep('__device__ __forceinline__ int* counter(', '__shared__ unsigned long long g_waited;\n__device__ unsigned long long g_rec[8192 * 6];\n__device__ __forceinline__ int* counter(')
rep('bars, slots, [&](int task) { run_task(op, task, smem, bars); });', '''bars, slots, [&](int task) {
                                        const unsigned long long t0 = queue::nanoseconds();
                                        if (threadIdx.x == 0) g_waited = t0;
                                        run_task(op, task, smem, bars);
                                        if (threadIdx.x == 0) {
                                          unsigned smid;
                                          asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
                                          unsigned long long* r = g_rec + 6 * task;
                                          r[0] = task, r[1] = smid, r[2] = t0, r[3] = g_waited, r[4] = queue::nanoseconds(), r[5] = 1;
                                        }
                                      });''')
# the wait: record when it ended (wait_stage wraps wait_for)
rep('  auto wait_stage = [&](int layer, int s) { wait_for(counter(op, layer, s), op.padded[s]); };',
    '  auto wait_stage = [&](int layer, int s) {\n    wait_for(counter(op, layer, s), op.padded[s]);\n    if (threadIdx.x == 0) g_waited = queue::nanoseconds();\n  };')
rep('''                    unsigned(std::min(clusters, sms / group) * group), kThreads, kSmem, s, group, op);''',
'''                    unsigned(std::min(clusters, sms / group) * group), kThreads, kSmem, s, group, op);
  if (const char* path = std::getenv("TT_TASK_TRACE")) {  // a measurement: each task's times, without a graph
    const int total = op.per_layer * op.layer_count;
    std::vector<unsigned long long> h(size_t(6) * total);
    CUDA_CHECK(cudaStreamSynchronize(s.handle));
    CUDA_CHECK(cudaMemcpyFromSymbol(h.data(), g_rec, h.size() * 8));
    FILE* f = std::fopen(path, "a");
    std::fprintf(f, "LAUNCH %d %d %d", total, op.per_layer, std::min(clusters, sms / group) * group);
    for (int t : op.padded) std::fprintf(f, " %d", t);
    std::fprintf(f, "\\n");
    for (int i = 0; i < total; ++i) {
      std::fprintf(f, "TASK");
      for (int k = 0; k < 6; ++k) std::fprintf(f, " %llu", h[size_t(6) * i + k]);
      std::fprintf(f, "\\n");
    }
    std::fclose(f);
  }''')
rep('#include <algorithm>\n', '#include <algorithm>\n#include <cstdio>\n#include <cstdlib>\n#include <vector>\n')
be = open(sys.argv[3]).read(); b = be
old = '  std::string block_backward_misfit(const BlockBackward& b) const override {\n'
assert old in b
b = b.replace(old, old + '    if (std::getenv("TT_ONE_BY_ONE")) return "TT_ONE_BY_ONE";\n', 1)
d = tempfile.mkdtemp()
out = ''
for path, a_text, b_text in (('src/ops/block_backward.cu', src, s), ('src/backend/cuda/cuda_backend.cpp', be, b)):
    for side, text in (('a', a_text), ('b', b_text)):
        os.makedirs(os.path.dirname(f'{d}/{side}/{path}'), exist_ok=True); open(f'{d}/{side}/{path}', 'w').write(text)
    out += subprocess.run(['diff', '-u', f'a/{path}', f'b/{path}'], cwd=d, capture_output=True, text=True).stdout
open(sys.argv[2], 'w').write(out)

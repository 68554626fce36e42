#!/usr/bin/env bash
# Two H200s: the whole GPU suite at HEAD (+ new RoPE-product shapes, debug's latest version), v5
# against v6 at other shapes, the headers, then RoPE in the QKV product past its token cap (patch).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && CUDA_VISIBLE_DEVICES=0 timeout 300 ctest -L "^gpu$" -j 10 --timeout 250 > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|Failed|\*\*\*" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0 timeout 60 build/tests/gpu_tests --gtest_filter='GpuRopeProduct*' > $L/rope-product.log 2>&1; echo "rope product rc $?"
CUDA_VISIBLE_DEVICES=0,1 timeout 200 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"
export CUDA_VISIBLE_DEVICES=0
timeout 120 build/tiny_llama debug all --device cuda > $L/debug_all.txt 2>&1; echo "debug rc $? $(el) s"; tail -9 $L/debug_all.txt
for P in gpt2-small medium; do
  timeout 120 build/tiny_llama bench --device cuda --levels v5,v6 --precisions bf16 --preset $P --repeats 3 --json $L/bench_$P.json > $L/bench_$P.log 2>&1
  echo "$P: $(grep -E '^v[56] ' $L/bench_$P.log | awk '{print $1, $5}' | tr '\n' ' ')"
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --preset $P --num-steps 3 > $L/header_$P.log 2>&1
done
for BT in "1 4096" "8 256" "8 512"; do set -- $BT
  timeout 120 build/tiny_llama bench --device cuda --levels v5,v6 --precisions bf16 --batch-sizes $1 --seq-lens $2 --repeats 3 --json $L/bench_$1x$2.json > $L/bench_$1x$2.log 2>&1
  echo "$1x$2: $(grep -E '^v[56] ' $L/bench_$1x$2.log | awk '{print $1, $5}' | tr '\n' ' ')"
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --batch-size $1 --seq-len $2 --num-steps 3 > $L/header_$1x$2.log 2>&1
done
echo "benches $(el) s"
git apply .dev/rope-any-tokens.patch && cmake --build build -j 32 --target tiny_llama >/tmp/build2.log 2>&1 || { tail -20 /tmp/build2.log; exit 1; }
export TT_ROPE_ANY_TOKENS=1
for BT in "8 256" "8 512" "1 4096" "16 1024"; do set -- $BT
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --batch-size $1 --seq-len $2 --num-steps 3 > $L/anytok_header_$1x$2.log 2>&1
  for rep in 1 2; do
    for sw in disable enable; do
      timeout 120 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes $1 --seq-lens $2 --repeats 3 --$sw-rope-in-qkv-product --json $L/anytok_$1x$2_${sw}_$rep.json > $L/anytok_$1x$2_${sw}_$rep.log 2>&1
    done
    echo "$1x$2 $rep: off $(grep -E '^v6 ' $L/anytok_$1x$2_disable_$rep.log | awk '{print $5}') on $(grep -E '^v6 ' $L/anytok_$1x$2_enable_$rep.log | awk '{print $5}')"
  done
done
timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --batch-size 8 --seq-len 512 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/anytok_profile_8x512 > $L/anytok_profile_8x512.log 2>&1
grep -E "qkv_gemm_rope|rope_kernel|nvjet_sm90_tst_128x" $L/anytok_profile_8x512/kernels.csv | head; rm -f $L/*/trace.json
git checkout src/ops/rope_product.cu
echo "== done $(el) s"

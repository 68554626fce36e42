#!/usr/bin/env bash
# For the next session's first call (one GPU): what this session could not run on a GPU.
# - GpuProfile with the family table's last line taking out the memory copies (ff60f8e);
# - the corrected byte counts (482541e: RoPE's FP8 backward, amax passes) and the printed ceilings
#   line, with the L2-resident copy measured or "not measured";
# - tiny_llama kernels' ceilings through train/ceilings.h (d15c37c);
# - the FP8 and kernel-check tests.
# Then: update docs/versions/v5.md's profile excerpt and the profile-bytes README's corrected RoPE
# numbers with what this prints.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuProfile*:Formats/Fp8Quantize.*:Fp8Model.*:GpuKernelCheck*' > $L/tests.log 2>&1; echo "tests rc $?"; tail -2 $L/tests.log; grep -E "FAILED|Failure" $L/tests.log | head
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
timeout 90 build/tiny_llama kernels --levels v4,v5 $G --ops swiglu,quantize,rope --json $L/kernels.json > $L/kernels.log 2>&1; echo "kernels rc $?"; grep -E "^Ceilings|^(swiglu|quantize|rope)" $L/kernels.log | sort -u
for run in "v5_gpt2:--version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --flops-profile" \
           "v5_medium:--version v5 --preset medium --num-steps 30 --timing-warmup-steps 20 --profile-steps 3" \
           "v5_current:--version v5 --preset gpt2-small --disable-fp8-delayed-scaling --num-steps 9 --timing-warmup-steps 6 --profile-steps 2"; do
  n=${run%%:*}
  timeout 100 build/tiny_llama --device cuda --use-amp ${run#*:} --log-every 100 --profile $L/profile_$n > $L/profile_$n.log 2>&1 || tail -5 $L/profile_$n.log
  echo "== $n"; grep -E " busy \+ " $L/profile_$n.log; sed -n "/Kernel time by family/,/the rows/p" $L/profile_$n.log
done
echo "== done $(( $(date +%s) - T0 )) s"

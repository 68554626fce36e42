#!/usr/bin/env bash
# Call 1: build, the GPU tests not run at the last code, default shape v1-v5 beside PyTorch.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests $(date +%T)"
ids=$(cd build && ctest -N -L "^gpu$" | grep -E "VocabPadding|Fp8Model.AResumed|GpuLaunch|GpuRecipe|FusedClassifier|GpuHf|GpuEval|GpuProfile|Fp8Quantize" | sed -nE 's/^ *Test +#([0-9]+):.*/\1/p' | paste -sd,)
(cd build && timeout 330 ctest -I "0,0,0,$ids" -j 4 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run|Skipped" $L/gpu-tests.log | head -20
echo "== default shape $(date +%T)"
timeout 90 build/tiny_llama bench --device cuda --levels v1,v2,v3,v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; echo "rc $?"; grep -E "^v[0-9]|^ver" $L/bench_default.log
left=$(( 580 - ($(date +%s) - T0) ))
[ $left -gt 30 ] && { PYTHONUNBUFFERED=1 timeout $left python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --batch-sizes 8 --seq-lens 128 --json $L/pytorch_default.json > $L/pytorch_default.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_default.log; }
echo "== done $(date +%T)"

#!/usr/bin/env bash
# One H200 at 0949ac4 + .dev/ahead-prio.patch: TT_FFN_AHEAD=1 (the first layer's FFN weight
# gradients and update ahead of its attention's backward, call 2's patch) and TT_WG_PRIO=mid (the
# weight-gradient lane above the update lane's priority, so that its group is not left behind
# AdamW's blocks): the bit tests with both; v6 in four configurations in turn at 8 x 128 (three
# rounds), 4 x 128 and 8 x 256 (two).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply .dev/ahead-prio.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
F='Fp8Model.WeightGradientsBehind*:Fp8Model.GroupedWeightGradients*:Fp8Model.Version6Tracks*'
TT_FFN_AHEAD=1 TT_WG_PRIO=mid timeout 60 build/tests/gpu_tests --gtest_filter=$F > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head -4
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5"
run() { env $1 timeout 40 $B --batch-sizes $2 --seq-lens $3 > $L/$4.log 2>&1; grep -E '^v6 ' $L/$4.log | awk '{print $5}'; }
C="base:X=0 ahead:TT_FFN_AHEAD=1 mid:TT_WG_PRIO=mid ahead+mid:TT_FFN_AHEAD=1,TT_WG_PRIO=mid"
for S in "8 128 3" "4 128 2" "8 256 2"; do set -- $S
  for R in $(seq 1 $3); do
    line="$1x$2 round $R:"
    for c in $C; do n=${c%%:*}; e=${c#*:}; line="$line $n $(run "${e/,/ }" $1 $2 ${n/+/_}_$1x$2_$R)"; done
    echo "$line $(el) s"
  done
done
echo "== done $(el) s"

#!/usr/bin/env bash
# weight-gradient-lane: its tests, then steps with and without it at the default shape, medium and gpt2-small (v4 bf16; v5 default), and a profile at the default shape.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuLaunch*:*GpuRecipeLane*:*GpuModel*' > $L/tests.log 2>&1; echo "tests rc $? $(tail -1 $L/tests.log)"; grep -E "FAILED|Failure" $L/tests.log | head
run() { # name, flags
  timeout 60 build/tiny_llama --device cuda --use-amp --log-every 1000 $2 > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"
}
for rep in 1 2 3; do
  for v in v4 v5; do
    run default_${v}_plain_$rep "--version $v --num-steps 300 --timing-warmup-steps 50"
    run default_${v}_lane_$rep "--version $v --num-steps 300 --timing-warmup-steps 50 --enable-weight-gradient-lane"
  done
done
for rep in 1 2; do
  run medium_v4_plain_$rep "--version v4 --preset medium --num-steps 50 --timing-warmup-steps 10"
  run medium_v4_lane_$rep "--version v4 --preset medium --num-steps 50 --timing-warmup-steps 10 --enable-weight-gradient-lane"
  run gpt2_v4_plain_$rep "--version v4 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10"
  run gpt2_v4_lane_$rep "--version v4 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10 --enable-weight-gradient-lane"
done
for s in plain lane; do
  f=""; [ $s = lane ] && f="--enable-weight-gradient-lane"
  timeout 60 build/tiny_llama --device cuda --use-amp --version v5 --num-steps 30 --timing-warmup-steps 20 --profile-steps 3 --log-every 100 --profile $L/prof_$s $f > $L/profile_default_$s.log 2>&1
  echo "== profile $s"; grep -E " busy \+ |Kernel launches" $L/profile_default_$s.log
done
echo "== done $(( $(date +%s) - T0 )) s"

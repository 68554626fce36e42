#!/usr/bin/env bash
# One H200: AdamW behind the backward against after it (TT_NOBEHIND) and AdamW four parameters a
# thread (TT_ADAMW_VEC), env switches of one build: bits, v5 steps, profiles.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
TT_ADAMW_VEC=1 timeout 200 build/tests/gpu_tests --gtest_filter='GpuLaunch.*:GpuOps.AdamW*:*TwentySteps*' > $L/adamw-tests-vec.log 2>&1; echo "tests with vec rc $?: $(grep -cE '^\[       OK' $L/adamw-tests-vec.log) ok"; grep -E "^\[  FAILED" $L/adamw-tests-vec.log | head
for v in v4 v5; do for e in base vec; do
  envs=(); [ $e = vec ] && envs=(TT_ADAMW_VEC=1)
  env "${envs[@]}" timeout 60 build/tiny_llama --device cuda --version $v --use-amp --num-steps 20 --log-every 1 --save $L/ck_${v}_$e.safetensors > $L/bits_${v}_$e.log 2>&1
  grep -E "^Step" $L/bits_${v}_$e.log | sed -E 's/.*(Loss: [0-9.]+).*(Norm: [0-9.]+).*/\1 \2/' > $L/bits_${v}_$e.losses
done
cmp $L/ck_${v}_base.safetensors $L/ck_${v}_vec.safetensors && echo "$v: the same checkpoint bytes"; cmp -s $L/bits_${v}_base.losses $L/bits_${v}_vec.losses && echo "$v: the same losses ($(wc -l < $L/bits_${v}_base.losses) lines)"
rm -f $L/ck_${v}_*.safetensors; done
echo "== steps $(el) s"
for rep in 1 2 3; do for p in gpt2-small medium default; do for e in base vec nobehind; do
  [ $p = default ] && [ $rep = 3 ] && continue
  envs=(); [ $e = vec ] && envs=(TT_ADAMW_VEC=1); [ $e = nobehind ] && envs=(TT_NOBEHIND=1)
  pre="--preset $p"; [ $p = default ] && pre=""
  n=${p}_${e}_$rep
  env "${envs[@]}" timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 $pre --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done; done
echo "== profiles $(el) s"
for e in base vec nobehind; do
  envs=(); [ $e = vec ] && envs=(TT_ADAMW_VEC=1); [ $e = nobehind ] && envs=(TT_NOBEHIND=1)
  env "${envs[@]}" timeout 60 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 12 --timing-warmup-steps 6 --profile-steps 3 --log-every 100 --profile $L/profile_$e --flops-profile > $L/profile_$e.log 2>&1 || tail -3 $L/profile_$e.log
  rm -f $L/profile_$e/trace.json
  echo "$e: $(grep -E '^ *AdamW' $L/profile_$e.log | head -1 | cut -c1-90) | $(grep -E 'busy' $L/profile_$e.log | head -1 | cut -c1-120)"
done
echo "== done $(el) s"

#!/usr/bin/env bash
# ZeRO-1 gathering bf16 weights (this tree) against its parent (base.tgz) in one job on 2 GPUs:
# bench gpt2-small and medium (fp32 sums), then the 2-GPU multigpu tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); N=$(nproc)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base && (cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build2.log 2>&1) || { tail -30 /tmp/cfg2.log /tmp/build2.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
G=$(nvidia-smi -L | wc -l)
for spec in ${SPECS:-"gpt2-small:--preset gpt2-small" "medium:--preset medium"}; do
  name=${spec%%:*}
  for tree in base new; do
    bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
    echo "== $name $tree $(date +%T)"
    timeout 200 $bin bench --nproc-per-node $G --device cuda --version ${VERSION:-v4} --use-amp ${spec#*:} --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 \
      --json $L/${name}_$tree.json > $L/${name}_$tree.log 2>&1 || tail -20 $L/${name}_$tree.log
    grep -E "^\| [0-9]" $L/${name}_$tree.log
  done
done
t=$(( 580 - ($(date +%s) - T0) ))
echo "== multigpu tests $(date +%T), $t s left"
(cd build && ctest -L multigpu -R "AShardedBf16.*2Gpus" --output-on-failure > $L/multigpu-new.log 2>&1; grep -E "tests passed|tests failed" $L/multigpu-new.log
 timeout $(( t - 60 )) ctest -L multigpu -R "2Gpus" -E AShardedBf16 --output-on-failure > $L/multigpu.log 2>&1)
grep -E "tests passed|tests failed|Test +#" $L/multigpu.log | head -30
grep -E "Failure|Expected|Which is|actual|\[ killed|\[ signal|\[ error" $L/multigpu*.log | head -30
echo "== done $(date +%T)"

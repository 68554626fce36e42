#!/usr/bin/env bash
# Session call 1: build; the v6 prototype (two dependent products in one persistent launch);
# the GPU tests of the model/launch/FP8 lists (products-without-workspace now at level 4);
# AdamW behind vs after at medium and gpt2-small if time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >$L/cfg.log 2>&1 && cmake --build build -j 12 --target tiny_llama gpu_tests >$L/build.log 2>&1; echo $? > $L/build.rc) &
BP=$!
cd .dev/v6proto
V="32:1 64:1 128:1 64:2 64:4 128:4 128:8"
for v in $V; do n=${v%%:*} k=${v##*:}
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../../src -DKN2=$n -DKSPLIT=$k chain.cu -lcublas -o chain_${n}_$k -Xptxas -v > $L/proto_build_${n}_$k.log 2>&1 &
done
wait $(jobs -p | grep -v "^$BP$") 2>/dev/null
echo "proto built $(el) s"
for v in $V; do n=${v%%:*} k=${v##*:}
  [ -x chain_${n}_$k ] || { tail -20 $L/proto_build_${n}_$k.log; continue; }
  echo "== KN2=$n KSPLIT=$k"; timeout 60 ./chain_${n}_$k 2>&1 | tee $L/chain_${n}_$k.log
done
timeout 60 compute-sanitizer --tool memcheck ./chain_64_4 > $L/memcheck.log 2>&1; echo "memcheck rc $? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
rm -f chain_*
cd ../..
wait $BP; echo "project built rc $(cat $L/build.rc) at $(el) s"; [ "$(cat $L/build.rc)" = 0 ] || { grep -B2 -A10 error $L/build.log | head -40; exit 1; }
(cd build && timeout $(( 430 - $(el) )) ctest -L "^gpu$" -R "GpuModel|GpuLaunch|Fp8Model" -j 4 --timeout 200 --output-on-failure > $L/gpu-tests.log 2>&1); echo "tests rc $? at $(el) s"
grep -cE "Test +#.*Passed" $L/gpu-tests.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout|tests passed|tests failed" $L/gpu-tests.log | head
step() { timeout 40 build/tiny_llama --device cuda --use-amp --log-every 1000 ${@:2} > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2; do for p in medium gpt2-small; do
  [ $(el) -gt 540 ] && break 2
  step behind_${p}_$rep --version v5 --preset $p --num-steps 30 --timing-warmup-steps 10
  step after_${p}_$rep --version v5 --preset $p --num-steps 30 --timing-warmup-steps 10 --grad-clip 1e9
done; done
echo "done $(el) s"

#!/usr/bin/env bash
# Session call 10: call 9 again, the warp-specialized kernel's staged store synced on its consumers
# only (call 9 hung: its producer warp never reached the block barrier the store waited on).
set -uo pipefail
cd "$(dirname "$0")/v6proto"
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
V="128:64:1:6"
PIDS=()
for v in $V; do IFS=: read r n k s <<<"$v"
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../../src -DROWS=$r -DKN2=$n -DKSPLIT=$k -DSTAGES=$s chain.cu -lcublas -lcuda -o ch_${r}_${n}_${k}_$s -Xptxas -v > $L/build_${r}_${n}_${k}_$s.log 2>&1 & PIDS+=($!)
done
wait "${PIDS[@]}"
echo "built $(el) s"
for v in $V; do IFS=: read r n k s <<<"$v"; b=ch_${r}_${n}_${k}_$s
  [ -x $b ] || { tail -20 $L/build_${r}_${n}_${k}_$s.log; continue; }
  echo "== ROWS=$r KN2=$n KSPLIT=$k STAGES=$s"; timeout 40 stdbuf -oL ./$b 2>&1 | tee $L/$b.log | grep -v "^tile"
done
timeout 40 compute-sanitizer --tool memcheck ./ch_128_64_1_6 > $L/memcheck.log 2>&1; echo "memcheck rc $? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
rm -f ch_*
echo "done $(el) s"

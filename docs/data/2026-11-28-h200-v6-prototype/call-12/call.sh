#!/usr/bin/env bash
# Next session (one H200, about a minute): the v6 prototype's second product. Call 11 of
# docs/data/2026-11-28-h200-v6-prototype left our first product at cuBLAS's speed (5.63 against 5.46
# us) and the second at 1.5x (8.85 against 5.82). cuBLAS runs it with 64 x 64 tiles and 13 buffers
# (nvjet_sm90_tst_64x64_64x13_2x1): try tiles of 64 rows (one warpgroup, -DROWS=64), 64 or 128
# wide for the first product (-DKN1), and up to 12 buffers. The warp-specialized variants need
# ROWS=128 and are left out of the 64-row builds.
set -uo pipefail
cd "$(dirname "$0")/v6proto"
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
V="128:128:32:1:6 64:64:64:1:12 64:64:64:1:8 64:128:64:1:8 64:64:32:1:12 64:64:64:2:12"
PIDS=()
for v in $V; do IFS=: read r n1 n k s <<<"$v"
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../../src -DROWS=$r -DKN1=$n1 -DKN2=$n -DKSPLIT=$k -DSTAGES=$s chain.cu -lcublas -lcuda -o ch_${r}_${n1}_${n}_${k}_$s -Xptxas -v > $L/build_${r}_${n1}_${n}_${k}_$s.log 2>&1 & PIDS+=($!)
done
wait "${PIDS[@]}"
echo "built $(el) s"
for v in $V; do IFS=: read r n1 n k s <<<"$v"; b=ch_${r}_${n1}_${n}_${k}_$s
  [ -x $b ] || { tail -20 $L/build_${r}_${n1}_${n}_${k}_$s.log; continue; }
  echo "== ROWS=$r KN1=$n1 KN2=$n KSPLIT=$k STAGES=$s"; timeout 40 stdbuf -oL ./$b 2>&1 | tee $L/$b.log | grep -v "^tile"
done
timeout 40 compute-sanitizer --tool memcheck ./ch_64_64_64_1_12 > $L/memcheck.log 2>&1; echo "memcheck rc $? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
rm -f ch_*
echo "done $(el) s"

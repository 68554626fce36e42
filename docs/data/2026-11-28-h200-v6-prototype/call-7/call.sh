#!/usr/bin/env bash
# Session call 7: as call 6, the barriers' arrivals and waits without cluster-scope release and
# acquire (the default semantics, as the buffers are read and written by the async proxy only).
set -uo pipefail
cd "$(dirname "$0")/v6proto"
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
V="128:64:1:4 128:64:1:6 128:32:1:6"
PIDS=()
for v in $V; do IFS=: read r n k s <<<"$v"
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../../src -DROWS=$r -DKN2=$n -DKSPLIT=$k -DSTAGES=$s chain.cu -lcublas -lcuda -o ch_${r}_${n}_${k}_$s -Xptxas -v > $L/build_${r}_${n}_${k}_$s.log 2>&1 & PIDS+=($!)
done
wait "${PIDS[@]}"
echo "built $(el) s"
for v in $V; do IFS=: read r n k s <<<"$v"; b=ch_${r}_${n}_${k}_$s
  [ -x $b ] || { tail -20 $L/build_${r}_${n}_${k}_$s.log; continue; }
  echo "== ROWS=$r KN2=$n KSPLIT=$k STAGES=$s"; timeout 60 ./$b 2>&1 | tee $L/$b.log | grep -v "^tile"
done
timeout 60 compute-sanitizer --tool memcheck ./ch_128_64_1_6 > $L/memcheck.log 2>&1; echo "memcheck rc $? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 120 compute-sanitizer --tool racecheck ./ch_128_64_1_6 > $L/racecheck.log 2>&1; echo "racecheck rc $? $(grep -c 'Error: Race' $L/racecheck.log) races, in: $(grep -o 'at [a-z_]*' $L/racecheck.log | sort -u | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool synccheck ./ch_128_64_1_6 > $L/synccheck.log 2>&1; echo "synccheck rc $? $(grep 'ERROR SUMMARY' $L/synccheck.log)"
rm -f ch_*
echo "done $(el) s"

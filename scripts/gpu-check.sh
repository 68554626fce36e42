#!/usr/bin/env bash
# One call on the GPU machine: build, run the GPU tests, run compute-sanitizer (memcheck and
# racecheck) on a 2-step training run, and time the default model. Logs and JSON go to $OUT
# (or /tmp/tt-gpu-check); a short table is printed last.
#   bash scripts/gpu-check.sh            everything
#   TT_SKIP_TESTS=1 bash scripts/gpu-check.sh   build and time only
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tt-gpu-check}
mkdir -p "$OUT"
BUILD=${BUILD:-build}
TT=$BUILD/tiny_llama
failures=()

echo "== build"
bash scripts/install-deps.sh || exit 1
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/configure.log" 2>&1 &&
       cmake --build "$BUILD" -j "$(nproc)" >"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/configure.log" "$OUT/build.log"
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

if [ -z "${TT_SKIP_TESTS:-}" ]; then
  echo "== GPU tests (ctest -L gpu)"
  if ! (cd "$BUILD" && ctest -L gpu --output-on-failure >"$OUT/gpu-tests.log" 2>&1); then
    failures+=("gpu tests")
    grep -E "Failure|Expected|Which is|rel_error|FAILED|not in|has unwritten|step " "$OUT/gpu-tests.log" | head -60
  fi
  grep -E "tests passed|tests failed" "$OUT/gpu-tests.log"

  echo "== compute-sanitizer on a 2-step run"
  for tool in memcheck racecheck; do
    for version in v1 v2; do
      log="$OUT/sanitizer-$tool-$version.log"
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$TT" --device cuda --version "$version" --num-steps 2 \
        --batch-size 2 --seq-len 64 --hidden-dim 128 --num-layers 2 --log-every 1 >"$log" 2>&1
      rc=$?
      summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
      echo "$tool $version: exit $rc, ${summary:-no summary}"
      [ $rc -eq 0 ] || { failures+=("sanitizer $tool $version"); tail -20 "$log"; }
    done
  done
fi

echo "== timing (default model, batch 8)"
for spec in ${TT_TIMING:-"v1:128:" "v1:256:" "v1:128:--tf32" "v1:128:--use-amp"}; do
  IFS=: read -r version seq extra <<<"$spec"
  name="${version}_T${seq}${extra//[- ]/_}"
  if ! "$TT" --device cuda --version "$version" --batch-size 8 --seq-len "$seq" --num-steps 40 --warmup-steps 10 \
       --log-every 40 $extra --json "$OUT/time_$name.json" >"$OUT/time_$name.log" 2>&1; then
    failures+=("timing $name"); tail -5 "$OUT/time_$name.log"
  fi
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "time_*.json"))):
    j = json.load(open(f)); s = j["summary"]; m = s["memory_bytes"]
    rows.append((os.path.basename(f)[5:-5], s["step_ms_median"], s["forward_ms"], s["backward_ms"], s["optimizer_ms"],
                 s["samples_per_sec"], s["tokens_per_sec"], s["tflops"], s["peak_memory_bytes"] / 1e6, j["steps"][-1]["loss"]))
print(f"{'run':<22}{'ms/step':>8}{'fwd':>7}{'bwd':>7}{'opt':>7}{'samp/s':>8}{'tok/s':>9}{'TFLOP/s':>8}{'MB':>8}{'loss':>8}")
for r in rows:
    print(f"{r[0]:<22}{r[1]:>8.2f}{r[2]:>7.2f}{r[3]:>7.2f}{r[4]:>7.2f}{r[5]:>8.0f}{r[6]:>9.0f}{r[7]:>8.2f}{r[8]:>8.0f}{r[9]:>8.4f}")
PY
if [ ${#failures[@]} -gt 0 ]; then
  echo "FAILED: ${failures[*]}"
  exit 1
fi
echo "ALL OK"

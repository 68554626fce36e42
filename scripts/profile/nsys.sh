#!/usr/bin/env bash
# Nsight Systems timeline of a short run (CUDA API, kernels, NVTX model regions, cuBLAS, cuDNN).
#   scripts/profile/nsys.sh OUTDIR [tiny_llama flags]
# Without nsys (as on the GPU machine this project is measured on) it says so and writes the
# built-in trace instead: OUTDIR/trace.json opens in Perfetto with the same kernels and regions.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/profile/nsys.sh OUTDIR [tiny_llama flags]}
shift
TT=${TT:-build/tiny_llama}
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--version v2 --use-amp --seq-len 128)
mkdir -p "$out"
if command -v nsys >/dev/null; then
  nsys profile --trace cuda,nvtx,cublas,cudnn --force-overwrite true -o "$out/timeline" \
    "$TT" --device cuda "${flags[@]}" --num-steps 10 --log-every 100
  echo "timeline: $out/timeline.nsys-rep (open in Nsight Systems)"
else
  echo "Nsight Systems (nsys) is not installed here; writing the built-in CUPTI trace instead (tiny_llama --profile)."
  "$TT" --device cuda "${flags[@]}" --num-steps 10 --timing-warmup-steps 5 --profile-steps 3 --profile "$out" --log-every 100 |
    sed -n '/Profile of/,/^Step/p'
  echo "timeline: $out/trace.json (open at https://ui.perfetto.dev or chrome://tracing)"
fi

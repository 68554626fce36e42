#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck on a 2-step training run of a small model whose heads
# have 64 elements (so that version 3 runs our flash attention); fails on any error.
#   scripts/profile/sanitize.sh [tiny_llama flags]   (default: --version v2 --use-amp)
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -uo pipefail
cd "$(dirname "$0")/../.."
TT=${TT:-build/tiny_llama}
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--version v2 --use-amp)
command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer is not installed" >&2; exit 1; }
status=0
for tool in memcheck racecheck; do
  log=$(mktemp)
  # cuDNN's generated flash-attention kernels use asynchronous (TMA/wgmma) shared-memory traffic
  # that racecheck does not model: racecheck leaves them out; memcheck checks them.
  exclude=()
  [[ $tool == racecheck ]] && exclude=(--kernel-name-exclude kns=cudnn_generated)
  compute-sanitizer --tool "$tool" "${exclude[@]}" --error-exitcode 3 "$TT" --device cuda "${flags[@]}" --num-steps 2 \
    --batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2 --log-every 1 >"$log" 2>&1
  rc=$?
  echo "$tool: exit $rc, $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)"
  if [ $rc -ne 0 ]; then status=1; tail -30 "$log"; fi
  rm -f "$log"
done
exit $status

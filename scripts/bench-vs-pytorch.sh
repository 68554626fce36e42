#!/usr/bin/env bash
# Our benchmark and the same model in PyTorch, in one job on one GPU, then the speed-up of each
# of our versions over each PyTorch mode, and the charts' data.
#   scripts/bench-vs-pytorch.sh OUTDIR [extra tiny_llama bench flags]
# Environment: VERSIONS (v1,v2), PRECISIONS (fp32,bf16), BATCHES (8), SEQS (128),
#              MODES (eager,graph,compile,compile+graph), the PyTorch modes.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/bench-vs-pytorch.sh OUTDIR [bench flags]}
shift
mkdir -p "$out"
TT=${TT:-build/tiny_llama}
VERSIONS=${VERSIONS:-v1,v2} PRECISIONS=${PRECISIONS:-fp32,bf16} BATCHES=${BATCHES:-8} SEQS=${SEQS:-128}
MODES=${MODES:-eager,graph,compile,compile+graph}

"$TT" bench --device cuda --levels "$VERSIONS" --precisions "$PRECISIONS" --batch-sizes "$BATCHES" --seq-lens "$SEQS" \
  --json "$out/ours.json" --csv "$out/ours.csv" "$@" | tee "$out/ours.log" | grep -vE "^\[#*\.*\]"
PYTHONUNBUFFERED=1 python3 tools/pytorch_reference.py --modes "$MODES" --precisions "$PRECISIONS" \
  --batch-sizes "$BATCHES" --seq-lens "$SEQS" --json "$out/pytorch.json" | tee "$out/pytorch.log"
python3 - "$out/ours.json" "$out/pytorch.json" <<'PY'
import json, sys
ours = [p for p in json.load(open(sys.argv[1]))["points"] if p["status"] == "ok"]
torch = [p for p in json.load(open(sys.argv[2]))["points"] if p["status"] == "ok"]
modes = list(dict.fromkeys(p["version"] for p in torch))
print("\nSpeed-up of each version over each PyTorch mode (PyTorch ms / our ms, same GPU, same job)")
print(f"{'ours':<22}{'ms':>8}" + "".join(f"{m.replace('pytorch-', ''):>16}" for m in modes))
for p in ours:
    same = {t["version"]: t for t in torch if (t["batch_size"], t["seq_len"], t["precision"]) ==
            (p["batch_size"], p["seq_len"], p["precision"])}
    cells = "".join(f"{same[m]['ms_median'] / p['ms_median']:>15.2f}x" if m in same else f"{'-':>16}" for m in modes)
    print(f"v{p['version']} {p['precision']} b{p['batch_size']} t{p['seq_len']:<8}{p['ms_median']:>8.3f}{cells}")
PY

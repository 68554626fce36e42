#!/usr/bin/env bash
# Nsight Compute on the top kernels of a short run: hardware counters and the roofline
# sections, with the GPU's clocks left as they are (--clock-control none).
#   scripts/profile/ncu.sh OUTDIR [tiny_llama flags]   (default flags: --version v2 --use-amp --seq-len 128)
# 1. a --profile run finds the 5 kernels with the most GPU time;
# 2. ncu measures 2 launches of each, after the warm-up, into OUTDIR/top.ncu-rep;
# 3. a table of time, compute and memory throughput (% of peak), registers and occupancy.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/profile/ncu.sh OUTDIR [tiny_llama flags]}
shift
TT=${TT:-build/tiny_llama}
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--version v2 --use-amp --seq-len 128)
command -v ncu >/dev/null || { echo "ncu (Nsight Compute) is not installed: 'tiny_llama --profile DIR' gives kernel times" >&2; exit 1; }
mkdir -p "$out"

"$TT" --device cuda "${flags[@]}" --num-steps 8 --timing-warmup-steps 5 --profile-steps 1 --profile "$out/trace" >"$out/trace.log"
# Base names of the top kernels (ncu matches the function name without template arguments).
regex=$(python3 - "$out/trace/kernels.csv" <<'PY'
import csv, re, sys
names = []
for row in csv.DictReader(open(sys.argv[1])):
    if row["kernel"].startswith(("memcpy", "memset")):
        continue
    base = re.sub(r"<.*", "", row["kernel"]).split("::")[-1]
    if base not in names:
        names.append(base)
    if len(names) == 5:
        break
print("|".join(re.escape(n) for n in names))
PY
)
echo "top kernels: $regex"
ncu --clock-control none --nvtx --target-processes all \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section MemoryWorkloadAnalysis \
  --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
  --kernel-name "regex:^($regex)$" --launch-skip 10 --launch-count 10 -f -o "$out/top" \
  "$TT" --device cuda "${flags[@]}" --num-steps 4 --timing-warmup-steps 0 --log-every 100 >"$out/ncu.log" 2>&1
ncu --import "$out/top.ncu-rep" --page raw --csv --metrics \
  gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  >"$out/top.csv"
python3 - "$out/top.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, units, data = rows[0], rows[1], [r for r in rows[2:] if r]
col = {name: i for i, name in enumerate(head)}
def num(r, m):
    try:
        v = float(r[col[m]].replace(",", ""))
    except (KeyError, ValueError):
        return float("nan")
    return v / 1e3 if m == "gpu__time_duration.sum" and units[col[m]] == "ns" else v
print(f"{'kernel':<60}{'us':>9}{'SM %':>8}{'memory %':>10}{'regs':>6}{'occupancy %':>13}")
for r in data:
    print(f"{r[col['Kernel Name']][:59]:<60}{num(r, 'gpu__time_duration.sum'):>9.2f}"
          f"{num(r, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):>8.1f}"
          f"{num(r, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'):>10.1f}"
          f"{num(r, 'launch__registers_per_thread'):>6.0f}{num(r, 'sm__warps_active.avg.pct_of_peak_sustained_active'):>13.1f}")
PY
echo "report: $out/top.ncu-rep (open in Nsight Compute, or: ncu --import $out/top.ncu-rep --page details)"

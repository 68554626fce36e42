#!/usr/bin/env python3
"""Charts of a benchmark run, as PNG files drawn by gnuplot (Debian's gnuplot-nox).

  tools/plot_results.py --ours ours.json --pytorch pytorch.json --memory memory.json --out docs/img

ours.json and memory.json come from `tiny_llama bench --json`, pytorch.json from
tools/pytorch_reference.py --json. Charts (each only when its data is there):
  throughput.png  samples/s of each version and PyTorch mode, by precision, at one batch and length
  speedup.png     each of our versions over each PyTorch mode, by precision
  split.png       forward / backward / optimizer ms of each version, by precision
  scaling.png     tokens/s against batch size, by version, precision and sequence length
  memory.png      peak memory against sequence length (batch 1), by version
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

STYLE = """set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics lc rgb '#dddddd'
set border 3
set xtics nomirror
set ytics nomirror
set key top left
"""


def load(path):
    if not path:
        return []
    with open(path) as f:
        return [p for p in json.load(f)["points"] if p.get("status") == "ok"]


def label(p):
    v = p["version"]
    return f"v{v}" if isinstance(v, int) else v.replace("pytorch-", "PyTorch ")


def gnuplot(script, data_files, out):
    with tempfile.TemporaryDirectory() as d:
        for name, text in data_files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        subprocess.run(["gnuplot"], input=STYLE + f"set output '{out}'\n" + script, text=True, check=True, cwd=d)
    print("wrote", out)


def bars(rows, columns, ylabel, title, out, stacked=False, extra=""):
    """rows: [(label, [values per column])]; a clustered (or stacked) bar chart."""
    text = "label " + " ".join(f'"{c}"' for c in columns) + "\n"
    text += "".join(f'"{r}" ' + " ".join(f"{v:.6g}" for v in vals) + "\n" for r, vals in rows)
    style = "rowstacked" if stacked else "clustered gap 1"
    extra = ("set key top right\n" if stacked else "") + extra
    plots = ", ".join(f"'d.txt' using {i + 2}:xtic(1) title columnhead" for i in range(len(columns)))
    gnuplot(f"""set title "{title}"
set ylabel "{ylabel}"
set style data histograms
set style histogram {style}
set style fill solid 0.85 border -1
set boxwidth 0.8
set xtics rotate by -25
set yrange [0:*]
{extra}plot {plots}
""", {"d.txt": text}, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours")
    ap.add_argument("--pytorch")
    ap.add_argument("--memory")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--out", default="docs/img")
    a = ap.parse_args()
    if shutil.which("gnuplot") is None:
        sys.exit("plot_results.py: gnuplot is not installed: `make plots` installs it (Debian's gnuplot-nox)")
    a.out = os.path.abspath(a.out)  # gnuplot runs in a temporary folder
    os.makedirs(a.out, exist_ok=True)
    ours, torch_pts, memory = load(a.ours), load(a.pytorch), load(a.memory)
    at = lambda pts: [p for p in pts if p["batch_size"] == a.batch and p["seq_len"] == a.seq_len]
    precisions = [pr for pr in ("fp32", "tf32", "bf16") if any(p["precision"] == pr for p in ours + torch_pts)]
    where = f"batch {a.batch}, sequence {a.seq_len}"

    both = at(ours) + at(torch_pts)
    names = list(dict.fromkeys(label(p) for p in both))
    if both:
        rows = [(n, [next((p["samples_per_sec"] for p in both if label(p) == n and p["precision"] == pr), 0)
                     for pr in precisions]) for n in names]
        bars(rows, precisions, "samples / s", f"Training throughput, {where}", f"{a.out}/throughput.png")

    if at(ours) and at(torch_pts):
        rows = []
        for p in at(ours):
            vals = []
            for t in [t for t in at(torch_pts) if t["precision"] == p["precision"]]:
                vals.append((label(t), t["ms_median"] / p["ms_median"]))
            rows.append((f"{label(p)} {p['precision']}", vals))
        modes = list(dict.fromkeys(m for _, vals in rows for m, _ in vals))
        bars([(r, [dict(v).get(m, 0) for m in modes]) for r, v in rows], [f"over {m}" for m in modes],
             "speed-up (x)", f"Speed-up over PyTorch on the same GPU, {where} (dashed: 1x)", f"{a.out}/speedup.png",
             extra="set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'black'\n")

    if at(ours):
        rows = [(f"{label(p)} {p['precision']}", [p["forward_ms"], p["backward_ms"], p["optimizer_ms"]]) for p in at(ours)]
        bars(rows, ["forward", "backward", "optimizer"], "ms per step", f"Where a step goes, {where}",
             f"{a.out}/split.png", stacked=True)

    series = sorted({(label(p), p["precision"], p["seq_len"]) for p in ours})
    if len({p["batch_size"] for p in ours}) > 1:
        files, plots = {}, []
        for i, (v, pr, t) in enumerate(series):
            pts = sorted((p for p in ours if label(p) == v and p["precision"] == pr and p["seq_len"] == t),
                         key=lambda p: p["batch_size"])
            files[f"s{i}.txt"] = "".join(f"{p['batch_size']} {p['tokens_per_sec']:.6g}\n" for p in pts)
            plots.append(f"'s{i}.txt' using 1:2 with linespoints lw 2 title '{v} {pr} T={t}'")
        gnuplot(f"""set title "Tokens per second against batch size"
set xlabel "batch size"
set ylabel "tokens / s"
set logscale x 2
set key outside right
plot {", ".join(plots)}
""", files, f"{a.out}/scaling.png")

    if memory:
        files, plots = {}, []
        for i, v in enumerate(sorted({label(p) for p in memory})):
            pts = sorted((p for p in memory if label(p) == v), key=lambda p: p["seq_len"])
            pr = pts[0]["precision"]
            files[f"m{i}.txt"] = "".join(f"{p['seq_len']} {p['peak_bytes'] / 1e6:.6g}\n" for p in pts)
            plots.append(f"'m{i}.txt' using 1:2 with linespoints lw 2 pt 7 title '{v} {pr}'")
        gnuplot(f"""set title "Peak memory against sequence length (batch {memory[0]['batch_size']})"
set xlabel "sequence length"
set ylabel "peak memory (MB)"
set logscale xy 2
plot {", ".join(plots)}
""", files, f"{a.out}/memory.png")


if __name__ == "__main__":
    main()

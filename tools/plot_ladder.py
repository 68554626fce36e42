#!/usr/bin/env python3
"""The ladder of versions as an SVG chart, with no plotting library.

  python3 tools/plot_ladder.py OUT.svg "TITLE" PANEL...

Each PANEL is NAME=BENCH.json[,PYTORCH.json]: a `tiny_llama bench --json` file (its points
v1..v4 in fp32 and bf16, one shape) and optionally tools/pytorch_reference.py's --json file of
the same shape; PyTorch's strongest run (the fastest of its modes) is drawn as a line per
precision. Bars are ms per step, lower is faster, one panel per shape side by side."""
import json
import sys


def points(path):
    j = json.load(open(path))
    return j["points"] if isinstance(j, dict) else j


def main(out, title, panels):
    W, H, top, bottom, left = 300 * len(panels) + 40, 390, 60, 75, 50
    colors = {"fp32": "#9ecae1", "bf16": "#3182bd"}
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for k, (prec, color) in enumerate(colors.items()):
        svg.append(f'<rect x="{left + 160 * k}" y="34" width="12" height="12" fill="{color}"/>'
                   f'<text x="{left + 160 * k + 16}" y="44">ours, {prec}</text>')
    svg.append(f'<line x1="{left + 320}" y1="40" x2="{left + 345}" y2="40" stroke="#d62728" stroke-width="2"/>'
               f'<text x="{left + 350}" y="44">PyTorch strongest</text>')
    for i, panel in enumerate(panels):
        name, files = panel.split("=", 1)
        files = files.split(",")
        ours = {(p["version"], p["precision"]): p["ms_median"] for p in points(files[0]) if p.get("status", "ok") == "ok"}
        torch = {}
        for f in files[1:]:
            for p in points(f):
                if p.get("status", "ok") == "ok":
                    torch[p["precision"]] = min(torch.get(p["precision"], 1e30), p["ms_median"])
        ymax = max(list(ours.values()) + list(torch.values())) * 1.15
        x0 = left + 300 * i
        py = lambda v: H - bottom - v / ymax * (H - bottom - top)
        svg.append(f'<line x1="{x0}" y1="{H - bottom}" x2="{x0 + 260}" y2="{H - bottom}" stroke="black"/>')
        svg.append(f'<text x="{x0 + 130}" y="{H - 26}" text-anchor="middle">{name}</text>')
        for v in range(1, 5):
            for k, prec in enumerate(("fp32", "bf16")):
                if (v, prec) not in ours:
                    continue
                ms = ours[(v, prec)]
                x = x0 + 10 + (v - 1) * 62 + k * 26
                svg.append(f'<rect x="{x}" y="{py(ms):.1f}" width="24" height="{H - bottom - py(ms):.1f}" fill="{colors[prec]}"/>')
                svg.append(f'<text x="{x + 12}" y="{py(ms) - 4:.1f}" text-anchor="middle" font-size="9">{ms:.2f}</text>')
            svg.append(f'<text x="{x0 + 10 + (v - 1) * 62 + 25}" y="{H - bottom + 16}" text-anchor="middle">v{v}</text>')
        for prec, ms in torch.items():
            svg.append(f'<line x1="{x0}" y1="{py(ms):.1f}" x2="{x0 + 260}" y2="{py(ms):.1f}" stroke="#d62728" '
                       f'stroke-width="2" stroke-dasharray="{"6,3" if prec == "fp32" else ""}"/>')
        if torch:
            label = ", ".join(f"{prec} {ms:.2f}" for prec, ms in sorted(torch.items(), reverse=True))
            svg.append(f'<text x="{x0 + 130}" y="{H - 6}" text-anchor="middle" fill="#d62728" font-size="11">'
                       f'PyTorch strongest: {label}{" (dashed: fp32)" if "fp32" in torch else ""}</text>')
        svg.append(f'<text x="{x0 - 6}" y="{top - 6}" font-size="10">ms/step</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])

#!/usr/bin/env python3
"""The training and validation loss of a run as an SVG chart, with no plotting library.

  python3 scripts/plot_loss.py RUN.json OUT.svg [TITLE]
  python3 scripts/plot_loss.py --validation OUT.svg TITLE RUN.json=LABEL ...

RUN.json is what `tiny_llama ... --json RUN.json` (or bench/pytorch_train.py --json) writes: the
per-step training loss (drawn as a mean over 50 steps) and the validation losses (--eval-every).
--validation draws the validation curves of several runs on one chart, its scale fitted to them."""
import json
import math
import sys


def main(src, dst, title):
    run = json.load(open(src))
    steps = [(s["step"], s["loss"]) for s in run["steps"]]
    val = [(v["step"], v["loss"]) for v in run.get("validation", [])]
    window = 50
    train = []
    for i in range(window - 1, len(steps), window // 2):
        chunk = steps[i - window + 1:i + 1]
        train.append((chunk[-1][0], sum(l for _, l in chunk) / len(chunk)))
    xs = [s for s, _ in steps] + [s for s, _ in val]
    ys = [l for _, l in train] + [l for _, l in val]
    x0, x1, y0, y1 = 0, max(xs), 0, max(ys) * 1.05
    W, H, L, B, T, R = 720, 400, 60, 50, 40, 20
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (y - y0) / (y1 - y0) * (H - B - T)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for k in range(0, int(y1) + 1):
        out.append(f'<line x1="{L}" y1="{py(k):.1f}" x2="{W - R}" y2="{py(k):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{L - 8}" y="{py(k) + 4:.1f}" text-anchor="end">{k}</text>')
    tick = max(1, round(x1 / 6, -2))
    for x in range(0, int(x1) + 1, int(tick)):
        out.append(f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" text-anchor="middle">loss</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    for series, color, name in ((train, "#1f77b4", f"training (mean of {window} steps)"), (val, "#d62728", "validation")):
        if series:
            pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
    for i, (color, name) in enumerate((("#1f77b4", f"training (mean of {window} steps)"), ("#d62728", "validation"))):
        y = T + 10 + 18 * i
        out.append(f'<line x1="{W - R - 210}" y1="{y}" x2="{W - R - 185}" y2="{y}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{W - R - 180}" y="{y + 4}">{name}</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


def compare(dst, title, runs):
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
    curves = []
    for spec in runs:
        path, label = spec.split("=", 1)
        curves.append((label, [(v["step"], v["loss"]) for v in json.load(open(path))["validation"]]))
    xs = [x for _, c in curves for x, _ in c]
    ys = [y for _, c in curves for _, y in c]
    x0, x1 = 0, max(xs)
    y0, y1 = math.floor(min(ys) * 2) / 2, math.ceil(max(ys) * 2) / 2
    W, H, L, B, T, R = 720, 400, 60, 50, 40, 20
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (y - y0) / (y1 - y0) * (H - B - T)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    k = y0
    while k <= y1 + 1e-9:
        out.append(f'<line x1="{L}" y1="{py(k):.1f}" x2="{W - R}" y2="{py(k):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{L - 8}" y="{py(k) + 4:.1f}" text-anchor="end">{k:g}</text>')
        k += 0.5
    tick = max(1, round(x1 / 6, -2))
    for x in range(0, int(x1) + 1, int(tick)):
        out.append(f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" '
               f'text-anchor="middle">validation loss</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    for i, (label, c) in enumerate(curves):
        color, dash = colors[i % len(colors)], ' stroke-dasharray="6 4"' if i else ""
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in c)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        y = T + 10 + 18 * i
        out.append(f'<line x1="{W - R - 260}" y1="{y}" x2="{W - R - 235}" y2="{y}" stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{W - R - 230}" y="{y + 4}">{label}</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == "--validation":
        compare(sys.argv[2], sys.argv[3], sys.argv[4:])
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "loss")

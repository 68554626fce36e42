#!/usr/bin/env python3
"""The training and validation loss of a run as an SVG chart, with no plotting library.

  python3 tools/plot_loss.py RUN[,RUN...] OUT.svg [TITLE]
  python3 tools/plot_loss.py --validation OUT.svg TITLE RUN.json=LABEL ...

RUN is what `tiny_llama ... --json RUN.json` (or tools/pytorch_train.py --json) writes, or the JSON
lines of `--metrics` (a --save-dir's metrics.jsonl): the per-step training loss (drawn as a mean over
up to 50 steps) and the validation losses. Several RUNs between commas are the legs of one run
(an interrupted run and its resumes): one curve, a later leg's steps replacing an earlier one's.
--validation draws the validation curves of several runs on one chart, its scale fitted to them."""
import json
import math
import sys


def chart(dst, title, ylabel, x1, y0, y1, ystep, curves, legend_width):
    """An SVG line chart from step 0 to x1 and y0 to y1 (a grid line every ystep), each curve
    (label, [(step, y)], color, dashed) drawn where it has points and named in the legend."""
    W, H, L, B, T, R = 720, 400, 60, 50, 40, 20
    px = lambda x: L + x / x1 * (W - L - R)
    py = lambda y: H - B - (y - y0) / (y1 - y0) * (H - B - T)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    k = y0
    while k <= y1 + ystep * 1e-6:
        out.append(f'<line x1="{L}" y1="{py(k):.1f}" x2="{W - R}" y2="{py(k):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{L - 8}" y="{py(k) + 4:.1f}" text-anchor="end">{k:g}</text>')
        k += ystep
    tick = nice_step(x1, 6)
    for x in range(0, int(x1) + 1, max(1, int(tick))):
        out.append(f'<text x="{px(x):.1f}" y="{H - B + 18}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" '
               f'text-anchor="middle">{ylabel}</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    dash = lambda dashed: ' stroke-dasharray="6 4"' if dashed else ""
    for _, points, color, dashed in curves:
        if points:
            pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash(dashed)}/>')
    for i, (label, _, color, dashed) in enumerate(curves):
        y = T + 10 + 18 * i
        out.append(f'<line x1="{W - R - legend_width}" y1="{y}" x2="{W - R - legend_width + 25}" y2="{y}" '
                   f'stroke="{color}" stroke-width="2"{dash(dashed)}/>')
        out.append(f'<text x="{W - R - legend_width + 30}" y="{y + 4}">{label}</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


def nice_step(span, most):
    """The grid step of 1, 2 or 5 times a power of ten that cuts `span` into at most `most` parts."""
    step = 10 ** math.floor(math.log10(span / most)) if span > 0 else 1
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= most:
            return step * factor
    return step * 10


def read_run(path):
    """(steps, validation) of a --json report or a --metrics file: [(step, loss)] each, by step."""
    text = open(path).read()
    try:
        run = json.loads(text)
        steps = {s["step"]: s["loss"] for s in run["steps"]}
        val = {v["step"]: v["loss"] for v in run.get("validation", [])}
    except json.JSONDecodeError:  # JSON lines: one record a log step
        steps, val = {}, {}
        for line in text.splitlines():
            if line.strip():
                r = json.loads(line)
                if r.get("loss") is not None:
                    steps[r["step"]] = r["loss"]
                if r.get("validation_loss") is not None:
                    val[r["step"]] = r["validation_loss"]
    return steps, val


def main(srcs, dst, title):
    steps, val = {}, {}
    for src in srcs.split(","):  # the legs of one run, a later one's steps winning
        s, v = read_run(src)
        steps.update(s)
        val.update(v)
    steps, val = sorted(steps.items()), sorted(val.items())
    window = max(1, min(50, len(steps) // 10))
    train = []
    for i in range(window - 1, len(steps), max(1, window // 2)):
        chunk = steps[i - window + 1:i + 1]
        train.append((chunk[-1][0], sum(l for _, l in chunk) / len(chunk)))
    xs = [s for s, _ in steps] + [s for s, _ in val]
    ys = [l for _, l in train] + [l for _, l in val]
    if not xs:
        sys.exit(f"plot_loss: {srcs} holds no losses")
    top = max(ys) * 1.05
    chart(dst, title, "loss", max(max(xs), 1), 0, top, nice_step(top, 10),
          [(f"training (mean of {window} steps)", train, "#1f77b4", False), ("validation", val, "#d62728", False)], 210)


def compare(dst, title, runs):
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
    curves = []
    for i, spec in enumerate(runs):
        path, label = spec.split("=", 1)
        points = [(v["step"], v["loss"]) for v in json.load(open(path))["validation"]]
        curves.append((label, points, colors[i % len(colors)], i > 0))
    ys = [y for _, c, _, _ in curves for _, y in c]
    chart(dst, title, "validation loss", max(x for _, c, _, _ in curves for x, _ in c), math.floor(min(ys) * 2) / 2,
          math.ceil(max(ys) * 2) / 2, 0.5, curves, 260)


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

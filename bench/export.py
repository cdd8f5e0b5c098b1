"""Offline export speed and size (issue 20): one chart as PNG / SVG / HTML, a lesson deck and a PDF report.

    python bench/export.py [--model PATH] [--steps 10] [--quick]

Charts are the head view of the model (core.lens.head_view) for different layers and heads; the forward pass is
done once before timing, so the figures are export only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    from core import lens, settings
    from core.charts import chart_html, chart_png, chart_svg
    from core.report import deck_html, report_pdf

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(settings.data_dir() / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 steps")
    args = parser.parse_args()
    n = 3 if args.quick else args.steps
    text = "The teacher explained how the river bank differs from the bank that keeps money."
    lm = lens.load(args.model)
    n_layers, n_heads = lm.model.config.num_hidden_layers, lm.model.config.num_attention_heads
    charts = [lens.head_view(lm, text, layer=i % n_layers, heads=[i % n_heads]) for i in range(n)]
    chart_html(charts[0])  # first call loads vl-convert's engine
    rows = []
    for name, fn in (("PNG", lambda: chart_png(charts[0])), ("SVG", lambda: chart_svg(charts[0])),
                     ("HTML (interactive, offline)", lambda: chart_html(charts[0])),
                     ("notebook output (iframe)", lambda: lens._iframe(charts[0].to_dict())["text/html"])):
        out, seconds = timed(fn)
        rows.append((f"one chart, {name}", seconds, len(out)))
    steps = [(f"Step {i + 1}", c, "caption") for i, c in enumerate(charts)]
    out, seconds = timed(lambda: deck_html(steps))
    rows.append((f"deck_html, {n} steps", seconds, len(out)))
    out, seconds = timed(lambda: report_pdf(steps))
    rows.append((f"report_pdf, {n} steps", seconds, len(out)))
    print(f"model {args.model}, {len(lm.tokenizer(text)['input_ids'])} tokens")
    print("| what | seconds | bytes |\n|---|---|---|")
    for name, seconds, size in rows:
        print(f"| {name} | {seconds:.2f} | {size:,} |")


if __name__ == "__main__":
    main()

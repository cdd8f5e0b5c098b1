"""Every altair chart of the app, one module per page (data in, chart out; no streamlit here):

    attention       one-sentence views and heads over a dataset
    anisotropy      measures per layer
    pca             layerwise projections
    finetune        runs and what fine-tuning changes
    classification  confusion matrix, per-class F1 and class probabilities, shared by any page with a classifier
    export          PNG / SVG / CSV / offline interactive HTML, re-exported here so `charts.chart_png(chart)` works from the package
"""

from __future__ import annotations

from core.charts.export import chart_html, chart_png, chart_svg, frame_csv

__all__ = ["chart_html", "chart_png", "chart_svg", "frame_csv"]

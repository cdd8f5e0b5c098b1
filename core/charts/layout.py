"""How big a chart is drawn and how its token labels fit: one helper for every builder in core.charts.

A chart sizes itself from its data: each token row or column gets at least MIN_ROW_PX, every label is drawn
(vega's labelOverlap would otherwise drop every 2nd or 4th token), a label longer than LABEL_LIMIT_PX ends in "…"
with the full text in the tooltip, and `fixed_size` sets the chart's own autosize. Without it Streamlit gives the
spec `autosize: fit`, which squeezes axes, title and legend *into* the stated width and height: a 14-token
heatmap's rows shrank to 2 px and its title was cut.

`for_presentation` returns the same chart with larger type and rows (presenter mode and slides).
"""

from __future__ import annotations

import altair as alt

# A token row (or column) is never drawn thinner than this: the 11 px axis labels then never overlap.
MIN_ROW_PX = 16
# A label longer than this many pixels ends in "…"; the tooltip carries the full token.
LABEL_LIMIT_PX = 140
# Presenter mode: type and rows this many times larger.
PRESENTATION_SCALE = 1.4

PAD = alt.AutoSizeParams(type="pad", contains="padding")


def token_step() -> alt.Step:
    """The size of a chart's token axis: MIN_ROW_PX per row, however many rows (vega grows the chart with them)."""
    return alt.Step(MIN_ROW_PX)


def token_axis(*, angle: int = 0, **options) -> alt.Axis:
    """An axis of tokens (or other names) on which every label is drawn, each beside its own row: no overlap
    culling and no flush first/last label (Streamlit's theme turns both on), long ones cut with "…"."""
    return alt.Axis(**{"labelOverlap": False, "labelFlush": False, "labelLimit": LABEL_LIMIT_PX, "labelAngle": angle,
                       "labelPadding": 3, **options})


def extent(n_rows: int, minimum: int = 0) -> int:
    """Pixels for n_rows rows of a continuous axis (a layered chart that cannot use alt.Step)."""
    return max(minimum, MIN_ROW_PX * n_rows)


def fixed_size(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """The chart drawn at the size its builder gave it, axes and title around it (not squeezed inside it)."""
    return chart.properties(autosize=PAD)


_FONT_KEYS = ("fontSize", "labelFontSize", "titleFontSize", "size", "symbolSize", "subtitleFontSize")
_PRESENTATION_CONFIG = {
    "axis": {"labelFontSize": 15, "titleFontSize": 16},
    "legend": {"labelFontSize": 15, "titleFontSize": 16},
    "header": {"labelFontSize": 15, "titleFontSize": 16},
    "title": {"fontSize": 20, "subtitleFontSize": 15},
    "text": {"fontSize": 15},
}


def _scaled(node, scale: float, key: str | None = None):
    if isinstance(node, dict):
        if set(node) == {"step"} and isinstance(node["step"], (int, float)):
            return {"step": round(node["step"] * scale)}
        return {k: v if k in ("datasets", "data") else _scaled(v, scale, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_scaled(v, scale, key) for v in node]
    if key in _FONT_KEYS and isinstance(node, (int, float)) and not isinstance(node, bool):
        return round(node * scale, 1)
    if key in ("width", "height", "labelLimit") and isinstance(node, (int, float)) and not isinstance(node, bool):
        return round(node * scale)
    return node


def presentation_spec(spec: dict, scale: float = PRESENTATION_SCALE) -> dict:
    """A Vega-Lite spec with larger type (config and every explicit font size) and rows, for a projector."""
    scaled = _scaled(spec, scale)
    config = dict(scaled.get("config", {}))
    for group, values in _PRESENTATION_CONFIG.items():
        config[group] = {**values, **config.get(group, {})}  # a size the chart set itself, scaled above, wins
    scaled["config"] = config
    return scaled


_CHART_CLASSES = {"layer": alt.LayerChart, "hconcat": alt.HConcatChart, "vconcat": alt.VConcatChart,
                  "concat": alt.ConcatChart, "facet": alt.FacetChart, "repeat": alt.RepeatChart}


def for_presentation(chart: alt.TopLevelMixin, scale: float = PRESENTATION_SCALE) -> alt.TopLevelMixin:
    """The chart for presenter mode: presentation_spec of its spec, as an altair chart of the same kind again."""
    spec = presentation_spec(chart.to_dict(), scale)
    kind = next((cls for key, cls in _CHART_CLASSES.items() if key in spec), alt.Chart)
    return kind.from_dict(spec, validate=False)

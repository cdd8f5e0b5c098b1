"""How big a chart is drawn and how its token labels fit: one helper for every builder in core.charts.

A chart sizes itself from its data: each token row or column gets at least MIN_ROW_PX, every label is drawn
(vega's labelOverlap would otherwise drop every 2nd or 4th token), a label longer than LABEL_LIMIT_PX ends in "…"
with the full text in the tooltip, and `fixed_size` sets the chart's own autosize. Without it Streamlit gives the
spec `autosize: fit`, which squeezes axes, title and legend *into* the stated width and height: a 14-token
heatmap's rows shrank to 2 px and its title was cut.

`for_presentation` returns a copy with larger type and rows (presenter mode; app_pages.widgets.common.draw_chart applies it).
"""

from __future__ import annotations

import json
import math
import textwrap

import altair as alt

# A token row (or column) is never drawn thinner than this: the 11 px axis labels then never overlap.
MIN_ROW_PX = 16
# The narrowest plot a chart draws (a projector at the back of a room): a 10-token heatmap of 16 px columns was
# 160 px wide, its rotated labels overprinting each other.
MIN_CHART_PX = 320
# Columns narrower than this get their labels upright (-90°): at -45° neighbouring labels lie only
# step × sin 45° apart, under an 11 px line ("8·." over "9·[SEP]").
SLANTED_LABEL_MIN_STEP = 24
# A gradient (colour ramp) legend is this long unless the chart says otherwise (Vega's default).
GRADIENT_PX = 200
# The labels of a 0..1 ramp: both ends always named (left to Vega, a horizontal ramp's "100%" was dropped as
# overlapping "80%" in presenter mode's larger type).
SHARE_TICKS = [0, 0.25, 0.5, 0.75, 1]
# A label longer than this many pixels ends in "…"; the tooltip carries the full token.
LABEL_LIMIT_PX = 140
# Presenter mode: type and rows this many times larger.
PRESENTATION_SCALE = 1.4

PAD = alt.AutoSizeParams(type="pad", contains="padding")
# A measured line beside a paper's: strong blue and grey, both over 5:1 on white. Left to Streamlit's theme, the
# second series of a chart is pale blue (#83c9ff, 1.8:1), and a measured line drawn in it read as missing.
MEASURED_COLOUR, PAPER_COLOUR = "#0068c9", "#6b6b6b"
# The colours of every series a chart leaves to the theme (`legible_colours`): each over 3:1 on white (WCAG's floor
# for graphics) and each pair apart by a CIELAB distance of 25 or more. Streamlit's own palette drew the second
# series in #83c9ff (1.8:1) and Vega's tableau10 (exports) has a yellow of 1.6:1. Blue first: a one-series chart
# keeps Streamlit's blue; orange second, the most unlike it.
CATEGORY_COLOURS = ("#0068c9", "#d55e00", "#2a8a3e", "#d62728", "#7b4fb0",
                    "#8c564b", "#c0397f", "#5f5f5f", "#a36b00", "#00838f")


def token_step() -> alt.Step:
    """The size of a chart's token axis: MIN_ROW_PX per row, however many rows (vega grows the chart with them)."""
    return alt.Step(MIN_ROW_PX)


def column_step(n_columns: int) -> alt.Step:
    """The width of one column of a heatmap (or bar) of n_columns: at least MIN_ROW_PX, and wide enough that the
    plot spans MIN_CHART_PX."""
    return alt.Step(max(MIN_ROW_PX, math.ceil(MIN_CHART_PX / max(n_columns, 1))))


def column_label_angle(step: alt.Step | int) -> int:
    """The angle of a column's labels: slanted (-45°) when the column is wide enough for slanted labels to stay
    apart, else upright (-90°, each label exactly a column apart)."""
    px = step.step if isinstance(step, alt.Step) else step
    return -45 if px >= SLANTED_LABEL_MIN_STEP else -90


def gradient_legend(plot_height_px: float | None = None, **options) -> alt.Legend:
    """A colour ramp's legend that is never cut: beside the plot when the plot is at least as tall as the ramp and
    its title, else under it, horizontal. Streamlit stretches a chart with `autosize: fit-x`, which does not grow
    the chart's height for a legend taller than its plot: the layer lens's "0%" (the ramp's bottom) was cut off
    under a 5-token grid. plot_height_px None: the height is not known (it grows with the data), so under it."""
    if plot_height_px is not None and plot_height_px >= GRADIENT_PX + 30:
        return alt.Legend(**options)
    return alt.Legend(**{"orient": "bottom", "direction": "horizontal", "gradientLength": GRADIENT_PX, **options})


# A legend's labels are cut at this many pixels (Vega's default, 160, cut "all-MiniLM-L6-v2 (random init)"): a legend
# label has no tooltip, so its cut words are lost.
LEGEND_LABEL_PX = 320

# A legend of dash patterns (a strokeDash channel) draws each pattern as a line this long, in grey: a dash legend's
# own symbols have no colour of their own.
LINE_LEGEND = dict(symbolType="stroke", symbolStrokeColor="#555555", symbolStrokeWidth=2, symbolSize=500)


def dashed_lines(base: alt.Chart, dash: alt.StrokeDash, **point) -> list[alt.Chart]:
    """Lines told apart by `dash` (its legend drawing each pattern, LINE_LEGEND) and a point at each value, as two
    layers. Not mark_line(point=True): Vega-Lite then draws the dash legend's symbols as filled points with no
    stroke, and a "stroke" symbol has no area to fill, so the legend showed names beside nothing and the lines
    could not be told apart."""
    if dash.legend is alt.Undefined:
        dash = dash.copy(deep=False)
        dash.legend = alt.Legend(**LINE_LEGEND)
    lines = base.mark_line().encode(strokeDash=dash)
    points = base.mark_point(**{"filled": True, "size": 40, **point})
    return [lines, points]


def token_axis(*, angle: int = 0, **options) -> alt.Axis:
    """An axis of tokens (or other names) on which every label is drawn, each beside its own row: no overlap
    culling and no flush first/last label (Streamlit's theme turns both on), long ones cut with "…"."""
    return alt.Axis(**{"labelOverlap": False, "labelFlush": False, "labelLimit": LABEL_LIMIT_PX, "labelAngle": angle,
                       "labelPadding": 3, **options})


def wrapped_labels(labels, chars: int = 80) -> str:
    """A legend's `labelExpr` that draws each label longer than `chars` characters on several lines, so none is cut
    with "…" (a legend or panel header label has no tooltip: the cut words are lost). Give the legend (header) a
    labelLimit wide enough for `chars` characters."""
    lines = {label: textwrap.wrap(label, chars) for label in labels if len(label) > chars}
    if not lines:
        return "datum.label"
    # datum.label in parentheses: a header's labelExpr gets it replaced by an unbracketed `a ? b : c`, and
    # `x || a ? b : c` reads as `(x || a) ? b : c`, the whole name again
    return f"({json.dumps(lines)})[(datum.label)] || (datum.label)"


def is_faceted(chart: alt.TopLevelMixin) -> bool:
    """A single chart split into panels by a row, column or facet encoding: sized as a grid, not as one view."""
    encoding = getattr(chart, "encoding", alt.Undefined)
    return isinstance(encoding, alt.SchemaBase) and any(
        getattr(encoding, channel, alt.Undefined) is not alt.Undefined for channel in ("row", "column", "facet"))


def legible_colours(chart: alt.TopLevelMixin | dict) -> alt.TopLevelMixin | dict:
    """The chart (or spec) with CATEGORY_COLOURS as the palette of every colour scale that sets no range or scheme
    of its own, unless its config names a palette; scales that do (NLI classes, heatmaps) are untouched. Every
    chart drawn or exported goes through it (app_pages.widgets.common.draw_chart, core.charts.export), so both match."""
    if isinstance(chart, dict):
        config = chart.get("config", {})
        if "category" in config.get("range", {}):
            return chart
        return {**chart, "config": {**config, "range": {**config.get("range", {}), "category": list(CATEGORY_COLOURS)}}}
    config = chart.config.to_dict() if isinstance(chart.config, alt.SchemaBase) else {}
    if "category" in config.get("range", {}):
        return chart
    return chart.configure_range(category=list(CATEGORY_COLOURS))


def fixed_size(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """The chart drawn at the size its builder gave it, axes and title around it (not squeezed inside it)."""
    return chart.properties(autosize=PAD)


_FONT_KEYS = frozenset({"fontSize", "labelFontSize", "titleFontSize", "size", "subtitleFontSize"})
_PIXEL_KEYS = frozenset({"width", "height", "labelLimit"})
_PRESENTATION_CONFIG = {
    "axis": {"labelFontSize": 15, "titleFontSize": 16},
    # labelLimit: the theme's 160 px, scaled with the type, or a legend's longer names end in "…" (no tooltip)
    "legend": {"labelFontSize": 15, "titleFontSize": 16, "labelLimit": round(160 * PRESENTATION_SCALE)},
    "header": {"labelFontSize": 15, "titleFontSize": 16},
    "title": {"fontSize": 20, "subtitleFontSize": 15},
    "text": {"fontSize": 15},
}


def _scale_in_place(node, scale: float) -> None:
    """Scale every step, explicit font size and fixed pixel size of an altair object tree (data left alone)."""
    if isinstance(node, (list, tuple)):
        for item in node:
            _scale_in_place(item, scale)
        return
    if not isinstance(node, alt.SchemaBase):
        return
    for key, value in node._kwds.items():
        if isinstance(value, alt.Step) and isinstance(value.step, (int, float)):
            node._kwds[key] = alt.Step(round(value.step * scale))
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            if key not in ("data", "datasets"):
                _scale_in_place(value, scale)
        elif key in _FONT_KEYS:
            node._kwds[key] = round(value * scale, 1)
        elif key in _PIXEL_KEYS:
            node._kwds[key] = round(value * scale)


def for_presentation(chart: alt.TopLevelMixin, scale: float = PRESENTATION_SCALE) -> alt.TopLevelMixin:
    """The chart for presenter mode: larger type (config, and every size the chart sets itself) and rows, for a
    projector at the back of a room. A copy; its data frames are the same objects (Streamlit ships them as Arrow)."""
    presented = _copy(chart)
    _scale_in_place(presented, scale)
    config = presented.config.to_dict() if isinstance(presented.config, alt.SchemaBase) else {}
    for group, values in _PRESENTATION_CONFIG.items():
        config[group] = {**values, **config.get(group, {})}  # a size the chart's config set itself, scaled above, wins
    presented.config = alt.Config.from_dict(config)
    return presented


def _copy(value):
    """A copy of an altair object tree that shares its data frames."""
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    if isinstance(value, alt.SchemaBase):
        copied = value.copy(deep=False)
        for key in list(copied._kwds):
            if key not in ("data", "datasets"):
                copied._kwds[key] = _copy(copied._kwds[key])
        return copied
    return value

"""What a chart looks like once drawn: its Vega-Lite spec, prepared as Streamlit sends it, rendered by vl-convert to
SVG and read back as positioned text (axis labels, titles, text marks) and rect sizes. Used by
tests/unit/test_chart_layout.py; the browser test measures the same things in the page's own SVG."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import altair as alt

SVG = "{http://www.w3.org/2000/svg}"
# Average glyph width of vl-convert's default sans-serif as a share of the font size, measured: a 70-character
# 12 px subtitle takes 393 px (0.47). SVG text carries no width, so "inside the chart" is judged with this.
GLYPH_WIDTH = 0.48


@dataclass(frozen=True)
class Text:
    """One drawn string: its role (axis-label, title-text, legend-label, mark, ...), anchor point in SVG
    coordinates, anchor (start / middle / end), font size and rotation in degrees."""

    text: str
    role: str
    x: float
    y: float
    anchor: str
    size: float
    angle: float

    @property
    def span(self) -> tuple[float, float]:
        """Estimated horizontal extent of an unrotated string."""
        width = len(self.text) * self.size * GLYPH_WIDTH
        start = {"start": self.x, "middle": self.x - width / 2, "end": self.x - width}[self.anchor]
        return start, start + width

    @property
    def box(self) -> tuple[float, float, float, float]:
        """Estimated (left, top, right, bottom) of the string, unrotated or upright (±90°), as drawn with
        baseline "middle" (a text mark's) or on its baseline (other text: its line box sits above it)."""
        start, end = self.span
        if round(abs(self.angle)) % 180 == 90:  # upright: the string's length runs along y
            along = (start - self.x, end - self.x)
            top, bottom = sorted(self.y + (a if self.angle > 0 else -a) for a in along)
            return self.x - self.size / 2, top, self.x + self.size / 2, bottom
        return start, self.y - self.size / 2, end, self.y + self.size / 2


@dataclass(frozen=True)
class Drawing:
    width: float
    height: float
    texts: list[Text]
    rects: list[tuple[float, float]]  # (width, height) of every rect mark
    mark_colours: frozenset[str] = frozenset()  # every fill and stroke of a mark, lower-case "#rrggbb"
    # each legend symbol as (path d, fill, stroke, stroke-width): what legend_symbols_drawn reads
    legend_symbols: tuple[tuple[str, str, str, float], ...] = ()
    # the points of every line mark's path, in SVG coordinates
    line_points: tuple[tuple[float, float], ...] = ()
    # (left, top) of every rect mark, in SVG coordinates, in the order of `rects`
    rect_origins: tuple[tuple[float, float], ...] = ()

    def strings(self, role: str | None = None) -> list[str]:
        return [t.text for t in self.texts if role is None or t.role == role]


# The parts of Streamlit's chart theme (frontend CustomTheme: axis config) that decide which axis labels are
# drawn: it culls overlapping labels and cuts them at 100 px unless the chart's own axis says otherwise.
STREAMLIT_AXIS_THEME = {"labelOverlap": True, "labelLimit": 100, "labelSeparation": 2, "labelFlush": True}
# Streamlit's light-theme palette (config.py, theme.chartCategoricalColors), the colours of any series whose chart
# names none: the frontend merges its theme under the chart's config, so a chart's own range.category wins.
STREAMLIT_CATEGORY_THEME = ["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d",
                            "#7defa1", "#ff8700", "#ffd16a", "#6d3fc0", "#d5dae5"]


# The page's main column (Streamlit's centered layout): the width the frontend gives a stretched chart.
MAIN_COLUMN_PX = 704


def as_streamlit_sends(chart: alt.TopLevelMixin, column_px: int = MAIN_COLUMN_PX) -> dict:
    """The spec as the app draws it: a single or layered chart that sets no autosize of its own is stretched to the
    main column with `fit-x` (app_pages.widgets.common.draw_chart; the frontend sets its width, "container" included)
    unless faceted by an encoding channel (Vega-Lite cannot fit those);
    Streamlit adds `autosize: fit` to any other chart without one (_prepare_vega_lite_spec), and its theme's axis
    config lies under the chart's own config."""
    from streamlit.elements.vega_charts import _prepare_vega_lite_spec

    spec = chart.to_dict() if not isinstance(chart, dict) else chart
    faceted = any(channel in spec.get("encoding", {}) for channel in ("row", "column", "facet"))  # fit never applies
    stretched = isinstance(chart, (alt.Chart, alt.LayerChart)) and chart.autosize is alt.Undefined and not faceted
    if stretched:
        spec = {**spec, "width": column_px, "autosize": {"type": "fit-x", "contains": "padding"}}
    spec = _prepare_vega_lite_spec(spec, use_container_width=False)
    config = dict(spec.get("config", {}))
    config["axis"] = {**STREAMLIT_AXIS_THEME, **config.get("axis", {})}
    config["range"] = {"category": STREAMLIT_CATEGORY_THEME, **config.get("range", {})}
    return {**spec, "config": config}


def _translate(transform: str | None) -> tuple[float, float, float]:
    if not transform:
        return 0.0, 0.0, 0.0
    dx = dy = angle = 0.0
    for x, y in re.findall(r"translate\(([-\d.e]+),\s*([-\d.e]+)\)", transform):
        dx, dy = dx + float(x), dy + float(y)
    for a in re.findall(r"rotate\(([-\d.e]+)", transform):
        angle += float(a)
    return dx, dy, angle


def _role(element: ET.Element, inherited: str) -> str:
    match = re.search(r"role-([\w-]+)", element.get("class", ""))
    return match.group(1) if match else inherited


def draw(chart, *, streamlit: bool = True, column_px: int = MAIN_COLUMN_PX) -> Drawing:
    """Render through vl-convert (as Streamlit would prepare it unless streamlit=False, in a column `column_px`
    wide) and read the SVG back."""
    import vl_convert as vlc

    spec = as_streamlit_sends(chart, column_px) if streamlit else (chart if isinstance(chart, dict) else chart.to_dict())
    root = ET.fromstring(vlc.vegalite_to_svg(spec))
    texts: list[Text] = []
    rects: list[tuple[float, float]] = []
    origins: list[tuple[float, float]] = []
    colours: set[str] = set()
    symbols: list[tuple[str, str, str, float]] = []
    points: list[tuple[float, float]] = []

    def walk(node: ET.Element, ox: float, oy: float, role: str, size: float) -> None:
        dx, dy, angle = _translate(node.get("transform"))
        x, y = ox + dx, oy + dy
        role = _role(node, role)
        if node.get("font-size"):
            size = float(re.match(r"[\d.]+", node.get("font-size")).group())
        tag = node.tag.replace(SVG, "")
        if role == "mark":
            colours.update(c.lower() for c in (node.get("fill"), node.get("stroke")) if c and c.startswith("#"))
        if tag == "text":
            lines = [span.text or "" for span in node.findall(f"{SVG}tspan")] or ["".join(node.itertext())]
            for line in lines:  # a multi-line title is one <text> with a <tspan> per line
                if line:
                    texts.append(Text(line, role, x, y, node.get("text-anchor", "start"), size, angle))
            return
        if tag == "path" and role == "mark" and node.get("aria-roledescription") in ("rect mark", "bar"):
            match = re.match(r"M([-\d.e]+),([-\d.e]+)h([-\d.e]+)v([-\d.e]+)", node.get("d", ""))
            if match:
                rects.append((abs(float(match.group(3))), abs(float(match.group(4)))))
                origins.append((x + float(match.group(1)), y + float(match.group(2))))
        if tag == "path" and role == "legend-symbol":
            symbols.append((node.get("d", ""), node.get("fill", "none"), node.get("stroke", "none"),
                            float(node.get("stroke-width", 1))))
        if tag == "path" and role == "mark" and node.get("aria-roledescription") == "line mark":
            points.extend((x + float(px), y + float(py))
                          for px, py in re.findall(r"[ML]([-\d.e]+),([-\d.e]+)", node.get("d", "")))
        for child in node:
            walk(child, x, y, role, size)

    walk(root, 0.0, 0.0, "", 10.0)
    return Drawing(float(root.get("width")), float(root.get("height")), texts, rects, frozenset(colours),
                   tuple(symbols), tuple(points), tuple(origins))


def dash_legends(chart) -> int:
    """How many legends of the chart (as Streamlit sends it) stand for a dash pattern alone (a strokeDash channel
    whose field no colour channel shares: a shared one's legend tells the series apart by colour)."""
    import vl_convert as vlc

    vega = vlc.vegalite_to_vega(as_streamlit_sends(chart))
    found = 0

    def walk(node) -> None:
        nonlocal found
        if isinstance(node, dict):
            found += sum(1 for legend in node.get("legends", [])
                         if "strokeDash" in legend and not {"fill", "stroke"} & set(legend))
            for mark in node.get("marks", []):
                walk(mark)

    walk(vega)
    return found


def dash_symbols(drawing: Drawing) -> int:
    """How many legend symbols are drawn as a stroked line (a dash pattern's sample)."""
    return sum(1 for d, _, stroke, width in drawing.legend_symbols
               if re.fullmatch(r"M[-\d.e]+,0L[-\d.e]+,0", d) and stroke not in ("none", "transparent") and width > 0)


def blank_legend_symbols(drawing: Drawing) -> list[str]:
    """The legend symbols drawn as nothing: a path with no stroke (or a transparent one) whose shape has no area to
    fill (a "stroke" symbol is one segment, "M-5,0L5,0"), or neither stroke nor fill."""
    def visible(colour: str) -> bool:
        return colour not in ("none", "transparent", "") and not colour.startswith("rgba(0,0,0,0")

    blank = []
    for d, fill, stroke, width in drawing.legend_symbols:
        segment = len(re.findall(r"[A-Za-z]", d)) <= 2 and not re.search(r"[AaZzCcQq]", d)
        if not ((visible(stroke) and width > 0) or (visible(fill) and not segment)):
            blank.append(f"{d} fill={fill} stroke={stroke}")
    return blank


def drawn(label: str, strings: list[str]) -> bool:
    """The label is drawn whole, or cut by labelLimit to a prefix ending in "…"."""
    return any(s == label or (s.endswith("…") and label.startswith(s[:-1]) and len(s) > 1) for s in strings)


def smallest_gap(values: list[float]) -> float:
    """The smallest distance between neighbouring distinct positions (rows of labels), inf for fewer than two."""
    ordered = sorted(set(round(v, 2) for v in values))
    return min((b - a for a, b in zip(ordered, ordered[1:])), default=math.inf)


def listed_colours(spec) -> set[str]:
    """Every colour a spec names for its series: its config's category palette and each colour scale's listed range
    (not a scheme: heatmap ramps are no categories)."""
    found = {c.lower() for c in spec.get("config", {}).get("range", {}).get("category", []) if isinstance(c, str)} \
        if isinstance(spec, dict) else set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for channel in ("color", "fill", "stroke"):
                scale = node.get(channel, {}).get("scale") if isinstance(node.get(channel), dict) else None
                if isinstance(scale, dict) and isinstance(scale.get("range"), list):
                    found.update(c.lower() for c in scale["range"] if isinstance(c, str) and c.startswith("#"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


def categorical_schemes(spec) -> set[str]:
    """The named schemes of a spec's nominal colour encodings: such a scheme's colours bypass the palette, and
    listed_colours cannot name them (an ordinal one, as layers, is a ramp like a heatmap's)."""
    found: set[str] = set()
    if isinstance(spec, dict):
        for channel in ("color", "fill", "stroke"):
            field = spec.get(channel)
            if isinstance(field, dict) and field.get("type") == "nominal" \
                    and isinstance(field.get("scale"), dict) and "scheme" in field["scale"]:
                found.add(str(field["scale"]["scheme"]))
        for value in spec.values():
            found |= categorical_schemes(value)
    elif isinstance(spec, list):
        for value in spec:
            found |= categorical_schemes(value)
    return found


def lab_distance(a: str, b: str) -> float:
    """CIE76 distance of two "#rrggbb" colours in CIELAB (D65): about 2.3 is the least a person notices; series
    colours want 20 or more."""
    def lab(colour: str) -> tuple[float, float, float]:
        rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, bl = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * bl) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * bl,
               (0.0193 * r + 0.1192 * g + 0.9505 * bl) / 1.08883)
        fx, fy, fz = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz]
        return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)

    return math.dist(lab(a), lab(b))


def contrast_on_white(colour: str) -> float:
    """WCAG contrast ratio against white of "#rrggbb" or a computed CSS "rgb(r, g, b)" (3:1 is WCAG's floor for graphics)."""
    values = [int(colour[i:i + 2], 16) for i in (1, 3, 5)] if colour.startswith("#") else \
        [int(v) for v in re.findall(r"\d+", colour)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in values)]
    return 1.05 / (0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2] + 0.05)

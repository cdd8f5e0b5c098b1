"""Offline export of any chart or table, its series in the app's colours (core.charts.layout.legible_colours):
SVG and PNG through vl-convert, interactive HTML around vl-convert's bundle
of Vega, Vega-Lite and Vega-Embed (so no CDN) with the spec embedded by core.safe_text, CSV."""

from __future__ import annotations

# vl_convert imported in functions: only an image or PDF export needs it, not drawing a chart.
import altair as alt
import pandas as pd

from core.charts.layout import legible_colours
from core.safe_text import inline_script, script_json

# vega-embed's action menu links to the online Vega Editor; an offline file should not offer a call to a third party.
EMBED_OPTIONS = {"actions": {"export": True, "source": True, "compiled": False, "editor": False}}


def offline_spec(chart: alt.TopLevelMixin | dict) -> dict:
    """The chart's Vega-Lite spec, data inlined, with embed options that keep vega-embed off the network."""
    spec = legible_colours(chart if isinstance(chart, dict) else chart.to_dict())
    usermeta = dict(spec.get("usermeta") or {})
    usermeta["embedOptions"] = {**EMBED_OPTIONS, **usermeta.get("embedOptions", {})}
    spec["usermeta"] = usermeta
    return spec


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline (vl-convert bundles Vega; no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(legible_colours(chart).to_dict())


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(legible_colours(chart).to_dict(), scale=scale)


def drawn_frame(chart: alt.TopLevelMixin | None) -> pd.DataFrame | None:
    """The rows a chart draws when it holds them as one frame (a plain or layered chart built on a DataFrame);
    None for a concatenation or a chart built otherwise."""
    data = getattr(chart, "data", None)
    return data if isinstance(data, pd.DataFrame) else None


def frame_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def chart_html(chart: alt.TopLevelMixin | dict, *, post_size: bool = False) -> str:
    """One self-contained, interactive HTML file: Vega, Vega-Lite and Vega-Embed inlined (about 1 MB), the data in
    the spec; it opens from disk with no network (tooltips, selections and the export menu keep working).

    The spec sits in a JSON data island written by core.safe_text.script_json (vl-convert's own vegalite_to_html
    pastes it into a script unescaped, so a "</script>" in a sentence or a CSV cell ran as code). post_size: the
    page posts its drawn height to the parent window ({"bertlensHeight": pixels}, on every resize and on a
    "bertlens-size?" message), for a sandboxed iframe whose parent cannot read its document (core.lens)."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="UTF-8">\n<title>Chart</title>\n'
        f"<style>{CHART_STYLE}</style>\n"
        f'<script type="text/javascript">\n{inline_script(javascript_bundle())}\n</script>\n</head>\n<body>\n'
        '<div id="vega-chart"></div>\n'
        f'<script type="application/json" id="vega-spec">{script_json(offline_spec(chart))}</script>\n'
        f'<script type="text/javascript">{EMBED_SCRIPT}{POST_SIZE_SCRIPT if post_size else ""}</script>\n</body>\n</html>\n'
    )


CHART_STYLE = "#vega-chart.vega-embed { width: 100%; display: flex; } #vega-chart details { position: relative; }"
EMBED_SCRIPT = """
vegaEmbed("#vega-chart", JSON.parse(document.getElementById("vega-spec").textContent), {"renderer": "svg"})
  .catch(console.error);
"""
# The content's own height (the body's box and margins), not the document's scroll height: that one is at least the
# frame's height, so a frame grown to it would measure taller again and grow without end.
POST_SIZE_SCRIPT = """
(function () {
  const body = document.body;
  function post() {
    const style = getComputedStyle(body);
    const height = body.getBoundingClientRect().height + parseFloat(style.marginTop) + parseFloat(style.marginBottom);
    parent.postMessage({bertlensHeight: Math.ceil(height)}, "*");
  }
  new ResizeObserver(post).observe(body);
  window.addEventListener("message", (e) => { if (e.data === "bertlens-size?") post(); });
})();
"""


def javascript_bundle() -> str:
    """Vega, Vega-Lite and Vega-Embed as one classic script defining window.vegaEmbed (for pages holding several
    charts: include it once, since its top-level declarations cannot be loaded twice into one page)."""
    import vl_convert as vlc

    return vlc.javascript_bundle()

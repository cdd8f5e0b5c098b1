"""Offline export of any chart or table: SVG, PNG and interactive HTML through vl-convert (it bundles Vega, Vega-Lite
and Vega-Embed, so no CDN), CSV."""

from __future__ import annotations

import altair as alt
import pandas as pd

# vega-embed's action menu links to the online Vega Editor; an offline file should not offer a call to a third party.
EMBED_OPTIONS = {"actions": {"export": True, "source": True, "compiled": False, "editor": False}}


def offline_spec(chart: alt.TopLevelMixin | dict) -> dict:
    """The chart's Vega-Lite spec, data inlined, with embed options that keep vega-embed off the network."""
    spec = dict(chart if isinstance(chart, dict) else chart.to_dict())
    usermeta = dict(spec.get("usermeta") or {})
    usermeta["embedOptions"] = {**EMBED_OPTIONS, **usermeta.get("embedOptions", {})}
    spec["usermeta"] = usermeta
    return spec


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline (vl-convert bundles Vega; no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), scale=scale)


def frame_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def chart_html(chart: alt.TopLevelMixin | dict) -> str:
    """One self-contained, interactive HTML file: Vega, Vega-Lite and Vega-Embed inlined (about 1 MB), the data in
    the spec; it opens from disk with no network (tooltips, selections and the export menu keep working)."""
    import vl_convert as vlc

    return vlc.vegalite_to_html(offline_spec(chart), bundle=True)


def javascript_bundle() -> str:
    """Vega, Vega-Lite and Vega-Embed as one classic script defining window.vegaEmbed (for pages holding several
    charts: include it once, since its top-level declarations cannot be loaded twice into one page)."""
    import vl_convert as vlc

    return vlc.javascript_bundle()

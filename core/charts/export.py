"""Offline export of any chart or table: SVG and PNG through vl-convert (it bundles Vega, so no CDN), CSV."""

from __future__ import annotations

import altair as alt
import pandas as pd


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline (vl-convert bundles Vega; no CDN)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), scale=scale)


def frame_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")

"""What every page shares: the cached model and forward pass, the sidebar's state, and export buttons.

Not a page itself: app.py lists the pages explicitly.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from core import charts
from core.encoding import encode
from core.models import LoadedModel, ModelUnavailable, load_model

# Keys of the shared sidebar widgets (set in app.py, read by every page).
MODEL_KEY, SENTENCE_A_KEY, SENTENCE_B_KEY = "model", "sentence_a", "sentence_b"


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def cached_model(ref: str) -> LoadedModel:
    return load_model(ref)


@st.cache_data(show_spinner="Running the model…", max_entries=32)
def cached_encoding(ref: str, text_a: str, text_b: str | None):
    """One forward pass per (model, text); widget changes on a page never rerun the model."""
    item = (text_a, text_b) if text_b else text_a
    return encode(cached_model(ref), item)


def model_ref() -> str:
    return st.session_state.get(MODEL_KEY) or ""


def sentences() -> tuple[str, str | None]:
    text_a = (st.session_state.get(SENTENCE_A_KEY) or "").strip()
    text_b = (st.session_state.get(SENTENCE_B_KEY) or "").strip() or None
    return text_a, text_b


def current_model() -> LoadedModel:
    """The sidebar's model, or an error on the page (and the page stops; the app keeps working)."""
    try:
        return cached_model(model_ref())
    except ModelUnavailable as err:
        st.error(str(err))
        st.stop()


def intro(what: str, how: str) -> None:
    """The two plain sentences every page opens with."""
    st.markdown(f"{what} {how}")


def set_example(text_a: str, text_b: str | None) -> None:
    """Button callback: put an example into the shared sidebar sentences."""
    st.session_state[SENTENCE_A_KEY] = text_a
    st.session_state[SENTENCE_B_KEY] = text_b or ""


def example_buttons(examples: dict[str, tuple[str, str | None]], key: str) -> None:
    columns = st.columns(len(examples))
    for column, (label, (text_a, text_b)) in zip(columns, examples.items()):
        column.button(label, key=f"{key}.{label}", on_click=set_example, args=(text_a, text_b), use_container_width=True)


def export_buttons(chart: alt.TopLevelMixin | None, table: pd.DataFrame | None, name: str, key: str) -> None:
    """PNG / SVG of the chart and CSV of its table; the images are rendered only when clicked."""
    columns = st.columns(3)
    if chart is not None:
        columns[0].download_button("PNG", lambda: charts.chart_png(chart), file_name=f"{name}.png", mime="image/png", key=f"{key}.png", icon=":material/image:")
        columns[1].download_button("SVG", lambda: charts.chart_svg(chart), file_name=f"{name}.svg", mime="image/svg+xml", key=f"{key}.svg", icon=":material/draw:")
    if table is not None:
        columns[2].download_button("CSV", charts.frame_csv(table), file_name=f"{name}.csv", mime="text/csv", key=f"{key}.csv", icon=":material/table:")

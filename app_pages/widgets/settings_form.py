"""A widget for one declared setting of an analysis (core.contract): its default, bounds, choices and help come
from the declaration, so the page, the CLI, core.lens and the URL offer the same values. The page gives only
what is its own: the label, the widget's session key and, where it helps, how a choice reads (`format_func`).

Layers: a setting whose `shown` is 1 (a transformer layer held as its array index, core.numbering) is drawn
as a choice of 1..L and handed back as the index (the session key holds the index, as the URL's Param expects),
so the widget reads as the chart's layer number; give `high` (the model's last index)."""

from __future__ import annotations

import streamlit as st

from core.contract import Analysis


def setting_input(analysis: Analysis, name: str, label: str, *, key: str, container=None, high=None,
                  format_func=None, disabled: bool = False, step=None, widget: str = "", horizontal: bool = False,
                  number_format: str | None = None):
    """Draw the setting `name` of `analysis` and return its value as the analysis holds it. `high` narrows the
    declared upper bound to what the data allows (e.g. a corpus's size); `widget` "radio" / "selectbox" /
    "segmented" for a setting with choices (default: radio for up to 3, else a selectbox), "checkbox" for a bool
    (default a toggle); `horizontal` lays a radio's options in a row; `number_format` a number input's printf
    format (e.g. "%.0e" for a learning rate, which the default format shows as 0.00)."""
    where = container if container is not None else st
    f = analysis.field(name)
    meta = f.meta
    help_text = meta.help[:1].upper() + meta.help[1:]
    if f.type == "bool":
        st.session_state.setdefault(key, f.default)
        draw_bool = where.checkbox if widget == "checkbox" else where.toggle
        return draw_bool(label, key=key, help=help_text, disabled=disabled)
    if meta.choices is not None and f.type in ("str", "int"):
        options = list(meta.choices)
        if st.session_state.get(key) not in options:
            st.session_state[key] = f.default if f.default in options else options[0]
        kind = widget or ("radio" if len(options) <= 3 else "selectbox")
        draw = {"radio": where.radio, "selectbox": where.selectbox, "segmented": where.segmented_control}[kind]
        extra = {"format_func": format_func} if format_func is not None else {}
        if kind == "radio" and horizontal:
            extra["horizontal"] = True
        return draw(label, options, key=key, help=help_text, disabled=disabled, **extra)
    if f.type == "int" and meta.shown:
        options = list(range(int(meta.low or 0), int(high if high is not None else meta.high) + 1))
        if st.session_state.get(key) not in options:
            st.session_state[key] = f.default if f.default in options else options[-1]
        return where.selectbox(label, options, key=key, help=help_text, disabled=disabled,
                               format_func=format_func or (lambda i: str(i + meta.shown)))
    if f.type in ("int", "float"):
        number = int if f.type == "int" else float
        low = None if meta.low is None else number(meta.low)
        top = meta.high if high is None else (high if meta.high is None else min(meta.high, high))
        top = None if top is None else number(top)
        # A value left from another model or corpus is brought inside the bounds rather than failing.
        value = st.session_state.get(key, f.default)
        if value is not None:
            value = number(value)
            if low is not None:
                value = max(low, value)
            if top is not None:
                value = min(top, value)
        st.session_state[key] = value
        return where.number_input(label, min_value=low, max_value=top, key=key, help=help_text,
                                  disabled=disabled, **({"step": number(step)} if step else {}),
                                  **({"format": number_format} if number_format else {}))
    st.session_state.setdefault(key, f.default if f.default is not None else "")
    return where.text_input(label, key=key, help=help_text, disabled=disabled)

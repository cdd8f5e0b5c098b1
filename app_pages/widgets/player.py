"""A slider with Play / Pause: while playing, a fragment shows the slider's next value every few seconds (the PCA
page's layers, the fine-tuning time-lapse's frames). The page is never blocked: each step is a timed rerun of the
fragment alone, and any widget still answers in between."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app_pages.widgets.common import PRESENTING, on_slide


def player(prefix: str, value_key: str, values: Callable[[], Sequence], slider: Callable[[DeltaGenerator], Any],
           show: Callable[[Any], None], *, seconds: float, refresh: float | None = None) -> None:
    """Draw `slider(column)` (a widget keyed `value_key`) with a Play/Pause button (key `prefix + "play"`; state
    `prefix + "playing"`) and `show(value)` below, in one fragment. `values()` lists the slider's values in order
    and is read again on every rerun of the fragment, so values that grow (frames of a run still training) are
    picked up; `refresh` reruns the fragment that often while not playing (None: only when used). Playing starts
    from the first value when the slider is at the last, and stops at the last."""
    playing_key, started_key = prefix + "playing", prefix + "just_started"
    st.session_state.setdefault(playing_key, False)

    def toggle() -> None:
        playing = not st.session_state[playing_key]
        st.session_state[playing_key] = playing
        if playing:
            st.session_state[started_key] = True
            options = list(values())
            if options and st.session_state.get(value_key) == options[-1]:
                st.session_state[value_key] = options[0]

    timer_on = st.session_state[playing_key]
    # A fragment reruns outside the page's run, where presenter mode's setting is gone: kept here, so a frame drawn
    # by Play has the same size as the first.
    presenting = PRESENTING.get()

    @st.fragment(run_every=seconds if timer_on else refresh)
    def playing_view() -> None:
        token = PRESENTING.set(presenting)
        try:
            _playing_view()
        finally:
            PRESENTING.reset(token)

    def _playing_view() -> None:
        if st.session_state[playing_key] != timer_on:
            # Play/Pause was pressed inside the fragment, which reruns only the fragment as it was defined, with or
            # without its timer: rerun the page so it is defined again with the right one.
            st.rerun()
        options = list(values())
        if not options:
            return
        if st.session_state.get(value_key) not in options:
            st.session_state[value_key] = options[-1]
        if st.session_state[playing_key]:
            index = options.index(st.session_state[value_key])
            if st.session_state.pop(started_key, False):
                pass
            elif index < len(options) - 1:
                st.session_state[value_key] = options[index + 1]
            else:
                st.session_state[playing_key] = False
                st.rerun()  # the whole page, so the fragment is defined again without its timer
        controls = st.columns([6, 1], vertical_alignment="bottom")
        value = slider(controls[0])
        controls[1].button(
            "Pause" if st.session_state[playing_key] else "Play",
            icon=":material/pause:" if st.session_state[playing_key] else ":material/play_arrow:",
            key=prefix + "play", on_click=toggle, width="stretch",
        )
        show(value)

    with on_slide():  # in presenter mode the whole player (slider, Play, charts) is on the slide
        playing_view()

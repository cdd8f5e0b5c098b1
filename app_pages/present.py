"""Presenter mode: a lesson full width, one view at a time, arrow keys to step, speaker notes kept off the slide.

Open as /present?lesson=<built-in lesson or "current">&step=<1-based>. The router has already put the step's view
into session state (presenter.prepare); this page draws the slide by running that view's page script.
"""

import runpy
from pathlib import Path

import streamlit as st

from app_pages.shell import prefetch as step_jobs
from app_pages.shell import presenter, router, url_state
from app_pages.widgets import ask_class
from app_pages.widgets.common import PRESENTING, SLIDE, Slide, cached_encoding, cached_model
from core import lessons, views
from core.safe_text import markdown_text
from core.model.loading import ModelUnavailable

REPO = Path(__file__).resolve().parents[1]
P = "present."

name, lesson, index = presenter.position()
if lesson is None:
    st.error(f"No lesson called “{markdown_text(name)}”. Built-in lessons: {', '.join(lessons.builtin())}; or `current`, the lesson "
             "you are editing on the Lessons page.")
    st.page_link("app_pages/lessons.py", label="Go to Lessons")
    st.stop()
if not lesson.steps:
    st.info("This lesson has no steps yet: add views with “Add this view to the lesson” in the sidebar of any page.")
    st.page_link("app_pages/lessons.py", label="Go to Lessons")
    st.stop()

# Full width, no sidebar, larger type: what a projector at the back of a room needs (only once there are slides:
# without a lesson the sidebar stays, to pick a model and reach the Lessons page).
st.markdown(
    """<style>
    section[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stSidebarNav"],
    header[data-testid="stHeader"] {display: none;}
    .block-container, [data-testid="stMainBlockContainer"] {max-width: 100% !important; padding: 1rem 2.5rem !important;}
    [data-testid="stMainBlockContainer"] p, [data-testid="stMainBlockContainer"] li,
    [data-testid="stMainBlockContainer"] label {font-size: 1.35rem !important;}
    [data-testid="stMainBlockContainer"] h1 {font-size: 3rem !important;}
    </style>""",
    unsafe_allow_html=True,
)

n = len(lesson.steps)
step = lesson.steps[index]
missing = lessons.missing_models(lesson)
missing_notes = lessons.missing_model_notes(lesson)


def prefetch() -> None:
    """Load every step's model and run its forward pass once, so stepping hits warm caches (shared by sessions)."""
    jobs = list(dict.fromkeys((s.params.get("model", ""), s.params.get("a", ""), s.params.get("b", ""))
                              for s in lesson.steps))
    bar = st.progress(0.0, text="Preparing every step (models and forward passes)…")
    for i, (ref, text_a, text_b) in enumerate(jobs):
        if ref and ref not in missing:
            try:
                cached_model(ref)
                if text_a:
                    cached_encoding(ref, text_a, text_b or None)
            except ModelUnavailable:
                pass  # the step itself says why when it is shown
        bar.progress((i + 1) / len(jobs), text=f"Prepared {i + 1} of {len(jobs)}")
    bar.empty()


if st.session_state.get(P + "prefetched") != (name, lesson):
    prefetch()
    st.session_state[P + "prefetched"] = (name, lesson)
# Corpus passes (a Run-button job on the page) go to core.jobs now, while the class sees the first slides.
step_jobs.start(name, lesson)

nav = st.columns([1, 6, 1])
nav[0].button("Previous", key=P + "prev", on_click=presenter.go, args=(-1,), disabled=index == 0, width="stretch")
nav[1].markdown(f"{markdown_text(lesson.title)} · step {index + 1} of {n}")
nav[2].button("Next", key=P + "next", on_click=presenter.go, args=(1,), disabled=index == n - 1, width="stretch")

# Arrow keys (and a clicker's PageUp/PageDown) press the buttons above; the handler lives in the app's own
# document, replaced on every run, and ignores keys typed into a text box.
KEYS = (
    """<script>
    window.parent.eval(`
      if (window.__lensKeys) document.removeEventListener('keydown', window.__lensKeys);
      window.__lensKeys = (e) => {
        const tag = (e.target && e.target.tagName) || '';
        if (tag === 'INPUT' || tag === 'TEXTAREA' || (e.target && e.target.isContentEditable)) return;
        const label = (e.key === 'ArrowRight' || e.key === 'PageDown') ? 'Next'
                    : (e.key === 'ArrowLeft' || e.key === 'PageUp') ? 'Previous' : null;
        if (!label) return;
        const button = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === label);
        if (button && !button.disabled) { e.preventDefault(); button.click(); }
      };
      document.addEventListener('keydown', window.__lensKeys);
    `);
    </script>"""
)
if hasattr(st, "iframe"):
    st.iframe(KEYS, height=1)  # the smallest height Streamlit allows; the frame only carries the key handler
else:  # Streamlit before st.iframe
    import streamlit.components.v1 as components

    components.html(KEYS, height=0)

# The slide: the step's title, then its charts first and full width (common.draw_chart puts them in `area`, whatever
# the page draws before them); the page itself runs folded under them, in its settings, so its forms and presets
# stay one click away without standing between the class and the chart.
st.header(markdown_text(step.title), anchor=False)
area = st.container(key=P + "slide")
waiting = area.empty()
prepared = step_jobs.step_state(index)
if prepared is not None and prepared[0] in ("running", "queued"):  # redrawn by the page when its job ends
    waiting.caption(f"This step's chart is being computed ({markdown_text(prepared[1])}); it appears here when done.")
else:
    waiting.caption("This step's chart appears here once it is computed: its settings, and its Run button where it "
                    "has one, are under “Settings of this view” below.")
settings = st.expander("Settings of this view (model, sentences, options)", icon=":material/tune:")
notes = st.container()
# Speaker notes stay folded under the slide: the presenter opens them on their own screen, the class sees the view.
# What only the presenter needs (why a model cannot load, which corpus passes are prepared) goes there too.
# Drawn (and the URL written) before the slide's page runs, since that page may call st.stop(), after which
# Streamlit drops what the run still sends.
speaker_notes = notes.expander("Speaker notes (presenter only)")
with speaker_notes:
    st.markdown(markdown_text(step.notes, keep_lines=True) if step.notes else "_No notes for this step._")
    for notice in st.session_state.get(P + "notices", ()):
        st.caption(markdown_text(notice))
    if missing:
        st.caption("Missing models: " + markdown_text(" ".join(missing_notes)))
    if step_jobs.step_line(index):
        st.caption(markdown_text(step_jobs.step_line(index)))
    step_jobs.status_list()
    st.caption(f"Next: {markdown_text(lesson.steps[index + 1].title)}" if index + 1 < n else "Last step.")
url_state.sync("present")

presenting = PRESENTING.set(True)  # the slide's charts get larger type and rows (common.draw_chart)
on_slide = SLIDE.set(Slide(area, waiting, speaker_notes))
try:
    with settings:
        router.sidebar(st.container())  # presenter mode hides the sidebar: its model and sentence boxes are here
        # A step on a page that asks the class itself asks there; any other step can take a typed question.
        if step.page in ask_class.PAGES or not ask_class.render("present", {}):
            runpy.run_path(str(REPO / views.page_file(step.page)), run_name="__main__")
finally:
    SLIDE.reset(on_slide)
    PRESENTING.reset(presenting)

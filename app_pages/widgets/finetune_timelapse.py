"""The fine-tuning page's time-lapse player: a run trained with a time-lapse (`finetune --timelapse N`, or the
form's "Time-lapse" box) measured itself at N steps; this plays those frames. The frames are measured inside the
training job and read from the run's timelapse.json, so the page never waits: a run still training shows the
frames so far (re-read every few seconds), a cancelled one the frames it kept."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.widgets.common import SLIDE, draw_chart, export_buttons, intro, model_ref, on_slide, to_speaker_notes
from app_pages.widgets.player import player
from core.charts import timelapse as charts
from core.model.loading import display_name
from core.safe_text import markdown_code, markdown_text
from core.training.runs import RunInfo, get_run, list_runs
from core.training.timelapse import FILE, Timelapse, read_timelapse
from core.views.finetune import timelapse_command

K = "finetune."
RUN_KEY, FRAME_KEY, MISSING_KEY = K + "timelapse", K + "frame", K + "timelapse_missing"
PLAY_SECONDS = 1.5
REFRESH_SECONDS = 3.0  # how often a run still training is read again for new frames


@st.cache_resource(max_entries=16, show_spinner=False)
def cached_timelapse(folder: str, version: tuple[int, int]) -> Timelapse | None:
    """One read per version of the file (its modification time and size are the key); the Timelapse is frozen,
    shared."""
    return read_timelapse(folder)


def current_timelapse(name: str) -> Timelapse | None:
    """The run's time-lapse as it is on disk now: a running run's folder is renamed when it ends, so found again."""
    run = get_run(name)
    if run is None:
        return None
    try:
        stat = (Path(run.folder) / FILE).stat()
    except OSError:
        return None
    return cached_timelapse(run.folder, (stat.st_mtime_ns, stat.st_size))


def cost_line(run: RunInfo, timelapse: Timelapse) -> str:
    measured, planned = len(timelapse.frames), len(timelapse.steps)
    share = f" ({timelapse.measure_share:.0%})" if timelapse.train_seconds > 0 else ""
    state = {"running": "still training: new frames appear as they are measured",
             "queued": "queued",
             "cancelled": f"cancelled: it kept {measured} of its {planned} frames",
             "failed": f"failed: it kept {measured} of its {planned} frames",
             "killed": f"killed: it kept {measured} of its {planned} frames"}.get(run.state, f"all {planned} frames")
    return (f"Measuring took {timelapse.measure_seconds:.1f} s of {timelapse.train_seconds:.1f} s training{share}; "
            f"{state}. Probe set: {markdown_code(timelapse.probe)} (seed {timelapse.seed}); loss and accuracy on "
            f"{timelapse.dev_examples:,} dev examples.")


def show_frame(name: str, step: int) -> None:
    """The four charts of the frame at `step`, and their exports."""
    timelapse = current_timelapse(name)
    built = charts.frame_charts(timelapse, [f.step for f in timelapse.frames].index(step))
    for row in (("curve", "similarity"), ("attention", "anisotropy")):
        for column, part in zip(st.columns(2), row):
            with column:
                draw_chart(built[part][0], key=f"{K}timelapse.{part}")
    with st.expander("Export this frame's charts (PNG, SVG, HTML, CSV)", icon=":material/download:"):
        for part, (chart, table) in built.items():
            st.caption(part)
            export_buttons(chart, table, f"timelapse-{name}-step{step}-{part}", key=f"{K}timelapse.export.{part}")


def with_frames(runs: list[RunInfo]) -> list[RunInfo]:
    return [r for r in runs if (Path(r.folder) / FILE).is_file()]


def run_titles(runs: list[RunInfo]) -> dict[str, str]:
    """{run name: what a slide calls it}: the model, task and frames of each run (run names are ids such as
    `bias-20261128-…-biased`, not for a class), numbered where two read alike."""
    titles = {}
    for run in runs:
        recipe = run.recipe or {}
        frames = (recipe.get("timelapse") or 0)
        title = (f"{display_name(str(recipe.get('model') or 'a model'))} fine-tuned on "
                 f"{str(recipe.get('task') or 'a task').upper()}" + (f", {frames} frames" if frames else ""))
        titles[run.name] = title
    counts = {t: list(titles.values()).count(t) for t in titles.values()}
    seen: dict[str, int] = {}
    for name, title in titles.items():
        if counts[title] > 1:
            seen[title] = seen.get(title, 0) + 1
            titles[name] = f"{title} (#{seen[title]})"
    return titles


def play_run(name: str) -> None:
    """Button callback: play this run's time-lapse (the lesson's run is not here)."""
    st.session_state[RUN_KEY] = name
    st.session_state.pop(MISSING_KEY, None)


def slide_notice(missing: str, playable: list[RunInfo]) -> None:
    """Presenter mode: the slide says the step's time-lapse is not here and offers, one click each, those that are;
    the command that makes the step's own run goes to the speaker notes."""
    with on_slide():
        st.info("This step's time-lapse run is not on this computer." + (" Play one that is:" if playable else
                " None is: make one before class (the command is in the speaker notes)."), icon=":material/movie:")
        titles = run_titles(playable)
        columns = st.columns(min(len(playable), 3)) if playable else []
        for i, run in enumerate(playable):
            columns[i % len(columns)].button(titles[run.name], key=f"{K}timelapse.offer.{i}", on_click=play_run,
                                             args=(run.name,), icon=":material/play_arrow:", width="stretch")
    to_speaker_notes(f"The step's time-lapse run {markdown_code(missing)} is not here. Make it with (a few minutes on "
                     f"a CPU): {markdown_code(timelapse_command(missing, model_ref() or 'MODEL'))}")


def missing_notice() -> None:
    """First thing in the Runs tab, so a slide shows it: a link or a lesson step named a time-lapse run that has no
    frames here; the one command that makes it (the name is kept until the user picks another run)."""
    runs = list_runs()
    requested = st.session_state.get(RUN_KEY)
    if requested and requested not in [r.name for r in with_frames(runs)]:
        st.session_state[MISSING_KEY], st.session_state[RUN_KEY] = requested, None
    missing = st.session_state.get(MISSING_KEY) if st.session_state.get(RUN_KEY) is None else None
    if not missing:
        return
    if SLIDE.get() is not None:  # presenter mode: no run ids on the slide; the time-lapses that are here instead
        slide_notice(missing, with_frames(runs))
    elif any(r.name == missing for r in runs):
        st.info(f"Run {markdown_code(missing)} has no time-lapse (yet): it was trained without one, or has not "
                "measured its first frame. Its frames play under Time-lapse below once it has some.")
    else:
        st.info(f"Time-lapse run {markdown_code(missing)} is not on this computer. Make it with this command (a few "
                f"minutes on a CPU), then reload: {markdown_code(timelapse_command(missing, model_ref() or 'MODEL'))}")


def render(runs: list[RunInfo]) -> None:
    """The "Time-lapse" section of the Runs tab: pick a run with a time-lapse, play its frames (after
    `missing_notice`, which settles a link's run that is not here)."""
    st.subheader("Time-lapse")
    intro("A time-lapse measures the model at evenly spaced steps while it trains: how similar each layer still is "
          "to the starting model, how much each head's attention moved, and the loss and accuracy so far.",
          "Pick a run trained with one, then drag the step slider or press Play to watch which layers change.")
    playable = with_frames(runs)
    names = [r.name for r in playable]
    missing = st.session_state.get(MISSING_KEY) if st.session_state.get(RUN_KEY) is None else None
    if not playable:
        st.caption("No run has a time-lapse yet: tick “Time-lapse” under “Start a run”, or add `--timelapse 10` to "
                   "`python -m core finetune`.")
        return
    by_name = {r.name: r for r in playable}
    titles = run_titles(playable) if SLIDE.get() is not None else {}  # a slide shows no run ids
    if not missing and st.session_state.get(RUN_KEY) not in names:
        st.session_state[RUN_KEY] = names[-1]
    name = st.selectbox("Run with a time-lapse", names, key=RUN_KEY, index=None, placeholder="Pick a run",
                        format_func=lambda n: (titles.get(n, n) + (f" ({by_name[n].state})" if by_name[n].state != "done" else "")))
    if name is None:
        return
    st.session_state.pop(MISSING_KEY, None)
    try:
        timelapse = current_timelapse(name)
    except ValueError as err:
        st.error(f"This run's time-lapse cannot be read: {markdown_text(err)}")
        return
    if timelapse is None or not timelapse.frames:
        st.info(f"Run {markdown_code(name)} has not measured its first frame yet.")
        return
    st.caption(cost_line(by_name[name], timelapse))
    steps = [f.step for f in timelapse.frames]
    requested = st.session_state.get(FRAME_KEY)
    st.session_state[FRAME_KEY] = steps[charts.frame_index(timelapse, requested if isinstance(requested, int) else None)]

    def measured_steps() -> list[int]:
        latest = current_timelapse(name)
        return [f.step for f in latest.frames] if latest is not None else steps

    player(K + "timelapse_", FRAME_KEY, measured_steps,
           lambda column: column.select_slider("Training step (frames measured so far)", measured_steps(),
                                               key=FRAME_KEY, format_func=lambda s: f"step {s}"),
           lambda step: show_frame(name, step),
           seconds=PLAY_SECONDS, refresh=REFRESH_SECONDS if by_name[name].state in ("queued", "running") else None)

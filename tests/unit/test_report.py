"""core.report and charts.chart_html: the PDF has one page per step with the chart drawn and the caption as text
(read back with poppler's pdftoppm / pdftotext); the HTML files carry the Vega libraries and no network reference."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import altair as alt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from core.charts import chart_html
from core.report import as_steps, deck_html, report_pdf


def poppler(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:  # CI installs poppler-utils (.ci/run); locally say what is missing
        import os

        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{tool} not found: apt-get install poppler-utils")
        pytest.skip(f"{tool} not found: apt-get install poppler-utils")
    return path


def bars(n: int, colour: str) -> alt.Chart:
    frame = pd.DataFrame({"word": [f"w{i}" for i in range(n)], "score": np.arange(1, n + 1, dtype=float)})
    return alt.Chart(frame).mark_bar(color=colour).encode(x="word:N", y="score:Q").properties(width=300, height=200)


STEPS = [("First “view”", bars(3, "#ff0000"), "Caption one: ‖α f(x)‖ → red bars."),
         ("Second view", bars(5, "#0000ff"), "Caption two.", "speaker notes, not in the PDF"),
         ("Third view", bars(2, "#00aa00").properties(height=900), "A tall chart, scaled to fit.")]


def test_pdf_has_one_page_per_step_with_chart_and_caption(tmp_path):
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(report_pdf(STEPS))
    subprocess.run([poppler("pdftoppm"), "-png", "-r", "30", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == len(STEPS)
    # each page shows its own chart: the bar colour of its step, and not the others'
    for path, colour in zip(pages, [(255, 0, 0), (0, 0, 255), (0, 170, 0)]):
        pixels = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3).astype(int)
        near = (np.abs(pixels - colour).sum(1) < 60).sum()
        assert near > 50, path.name
    text = subprocess.run([poppler("pdftotext"), "-layout", str(pdf), "-"], check=True, capture_output=True,
                          text=True).stdout.split("\f")
    assert "First “view”" in text[0] and "‖α f(x)‖ → red bars." in text[0]
    assert "Caption two." in text[1] and "speaker notes" not in "".join(text)
    assert "Third view" in text[2]


def test_steps_are_checked():
    with pytest.raises(ValueError):
        as_steps([])
    with pytest.raises(ValueError):
        as_steps([("only a title",)])
    assert as_steps([("t", bars(2, "red"))])[0].caption == ""


def _external_scripts(page: str) -> list[str]:
    return re.findall(r"<script[^>]+src\s*=|<link[^>]+href\s*=\s*[\"']?https?:|@import", page, flags=re.I)


def test_chart_html_inlines_the_libraries():
    page = chart_html(bars(3, "red"))
    assert not _external_scripts(page)
    assert "vegaEmbed" in page and len(page) > 500_000
    assert '"editor":false' in page.replace(" ", "")  # the action menu offers no link to the online editor


def test_deck_holds_every_step_once_with_notes_hidden():
    page = deck_html(STEPS, title="A <lesson>")
    assert not _external_scripts(page)
    assert page.count("window.vegaEmbed=") == 1  # the libraries once, not per slide
    assert page.count('<section class="slide"') == 3 and "<title>A &lt;lesson&gt;</title>" in page
    assert '<aside class="notes">speaker notes, not in the PDF</aside>' in page
    specs = json.loads(re.search(r'id="deck-specs">(.*?)</script>', page, re.S).group(1))
    assert [len(s["datasets"][next(iter(s["datasets"]))]) for s in specs] == [3, 5, 2]


def test_lesson_steps_give_a_slide_per_chart_and_text_slides(tmp_path):
    from core.report import lesson_steps

    def draw(page, params):
        if page == "attention":
            return [(bars(int(params["n"]), "a"), "cap a"), (bars(2, "b"), "cap b")]
        if page == "broken":
            raise ValueError("no such model")
        return []

    lesson = [{"title": "Heads", "page": "attention", "params": {"n": "3"}, "notes": "say it"},
              {"title": "Home", "page": "home", "params": {}, "notes": ""},
              {"title": "Broken", "page": "broken", "params": {}, "notes": "n"}]
    steps = lesson_steps(lesson, draw=draw)
    assert [s.title for s in steps] == ["Heads", "Heads (2)", "Home", "Broken"]
    assert steps[0].notes == "say it" and steps[1].notes == "" and steps[2].chart is None
    assert "no such model" in steps[3].caption
    pdf = tmp_path / "lesson.pdf"
    pdf.write_bytes(report_pdf(steps))
    subprocess.run([poppler("pdftoppm"), "-png", "-r", "20", str(pdf), str(tmp_path / "l")], check=True)
    assert len(list(tmp_path.glob("l-*.png"))) == 4
    page = deck_html(steps)
    assert page.count('<section class="slide"') == 4
    specs = json.loads(re.search(r'id="deck-specs">(.*?)</script>', page, re.S).group(1))
    assert [s is None for s in specs] == [False, False, True, True]


def test_a_step_whose_model_cannot_load_names_it_and_keeps_the_reason_for_the_notes():
    """Issue 48: the reason names the cache folder and other runs; the slide names the model by its display name."""
    from core.model.loading import ModelUnavailable
    from core.report import lesson_steps

    def draw(page, params):
        raise ModelUnavailable("Model 'bert-base-uncased' needs a download: it is not in /home/t/.cache/bertlens. "
                               "Models available locally: bias-20261128-0912-biased.")

    (step,) = lesson_steps([{"title": "Masked", "page": "masked", "params": {"model": "/models/bert-base-uncased"},
                             "notes": "say it"}], draw=draw)
    assert step.chart is None and "“bert-base-uncased”" in step.caption
    assert "/home/t" not in step.caption and "bias-2026" not in step.caption
    assert step.notes.startswith("say it") and "/home/t/.cache/bertlens" in step.notes

"""Issue 48: every step of every built-in lesson draws a chart outside the app too: through core.lens.view, in the
lesson's HTML deck (a Vega-Lite spec per slide) and in its PDF handout (a chart drawn on every page), never a
text-only fallback. The lesson runs as a teacher would run it on this computer: MiniLM from the data folder, a
masked-word model where the lesson names bert-base-uncased (not downloadable offline), the time-lapse run it names
made before class (hand-written here), a fine-tuned run trained before class (a tiny one), and the reproduce step on
a tiny model to keep the study short."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from core import lens, lessons
from core.report import deck_html, lesson_steps, report_pdf
from tests.app.test_finetune_timelapse import cancelled_run, frame
from tests.tiny_mlm import make_layered_mlm
from tests.unit.test_report import poppler



def quick_run(tiny: Path, folder: Path) -> None:
    """A finished fine-tuning run, as the lesson asks the teacher to train before class (a tiny model, 200 pairs)."""
    from core.training import Recipe, finetune

    rng = random.Random(0)
    path = folder / "animals.csv"
    path.write_text("text,label\n" + "".join(f"the {a} sat on the mat,{a}\n"
                                              for a in (rng.choice(["cat", "dog"]) for _ in range(200))))
    finetune(Recipe(model=str(tiny), task=str(path), run_name="quick-run", epochs=1, lr=1e-3, batch_size=16,
                    max_length=16, cpu_threads=1))


def for_this_computer(step: dict, mlm: str, tiny: str) -> dict:
    """The step as run here: a model that needs a download swapped for a local one with the same kind of head."""
    params = dict(step["params"])
    if params.get("model") == "bert-base-uncased":
        params["model"] = mlm
    if step["page"] == "reproduce":
        params["model"] = tiny  # the study on a 2-layer model: seconds, not minutes
    return {**step, "params": params}


def drawn_share(png) -> float:
    """Share of dark pixels in the page's middle band (30-85 % of its height), where a chart is placed: a text-only
    page has its caption right under the title, and nothing there (0.0 measured; charts: 0.01 to 0.5)."""
    pixels = np.asarray(Image.open(png).convert("L")).astype(int)
    height = pixels.shape[0]
    return float((pixels[int(height * 0.3):int(height * 0.85)] < 200).mean())


@pytest.mark.parametrize("name", list(lessons.builtin()))
def test_every_builtin_step_draws_in_lens_the_deck_and_the_pdf(name, tmp_path, minilm_dir, tiny_bert_dir):
    lesson = lessons.builtin()[name]
    mlm = str(make_layered_mlm(tmp_path / "mlm"))
    for step in lesson.steps:  # a time-lapse the lesson names, made before class
        if step.params.get("timelapse"):
            rng = np.random.default_rng(0)
            cancelled_run(step.params["timelapse"], json.dumps({
                "steps": [0, 5, 10], "probe": "snli:validation:100", "seed": 0,
                "frames": [frame(s, rng) for s in (0, 5, 10)], "dev_examples": 64, "measure_seconds": 1.0,
                "train_seconds": 5.0}))
    quick_run(tiny_bert_dir, tmp_path)
    steps = [for_this_computer(s.to_json(), mlm, str(tiny_bert_dir)) for s in lesson.steps]
    drawn = {}

    def draw(page, params):  # core.lens.view, recorded: the deck and the PDF are made from the same drawing
        drawn[len(drawn)] = charts = lens.view(page, params)
        return charts

    slides = lesson_steps(steps, draw=draw)
    for index, step in enumerate(steps):
        assert drawn[index], f"lens.view drew nothing for step {step['title']!r}"
    text_only = [s.title for s in slides if s.chart is None]
    assert not text_only, f"text-only slides: {text_only} ({[s.caption for s in slides if s.chart is None]})"

    page = deck_html(slides, title=lesson.title)
    specs = json.loads(re.search(r'id="deck-specs">(.*?)</script>', page, re.S).group(1))
    assert len(specs) == len(slides) and all(spec is not None for spec in specs)

    pdf = tmp_path / "lesson.pdf"
    pdf.write_bytes(report_pdf(slides, title=lesson.title))
    subprocess.run([poppler("pdftoppm"), "-png", "-r", "20", str(pdf), str(tmp_path / "p")], check=True)
    pages = sorted(tmp_path.glob("p-*.png"))
    assert len(pages) == len(slides)
    blank = [slides[i].title for i, png in enumerate(pages) if drawn_share(png) < 0.003]
    assert not blank, f"PDF pages without a drawn chart: {blank}"


def test_the_anisotropy_step_reads_the_corpus_as_the_page_does(minilm_dir):
    """The lesson's `corpus: Built-in sentences` (the page's source name) raised CorpusError in lens.view; drawn, its
    numbers are those of core.analyses.anisotropy over the same built-in sentences."""
    from core.analyses import anisotropy as an
    from core.data import corpus as corpora
    from core.model.loading import load_model

    (step,) = [s for s in lessons.builtin()["bert-in-ten-views"].steps if s.page == "anisotropy"]
    ((chart, caption),) = lens.view("anisotropy", {**step.params, "limit": "40", "pairs": "200"})
    assert "Built-in sentences" in caption and "40 sentences" in caption
    rows = [r for rows in chart.to_dict()["datasets"].values() for r in rows]
    shown = [r["value"] for r in sorted(rows, key=lambda r: r["layer"]) if r.get("measure", "random_cosine") == "random_cosine"]
    expected = an.measure_corpus(load_model(str(minilm_dir)), corpora.builtin(limit=40), an.AnisotropySettings(n_pairs=200))
    np.testing.assert_allclose(shown, expected.random_cosine, atol=1e-6)

"""Charts measured on screen: each view's drawn SVG (Streamlit draws small charts as SVG) read back with the
browser's own geometry. A chart fails when it is squeezed (a token row thinner than core.charts.layout.MIN_ROW_PX,
or a token label not drawn), clipped (a title or label outside the chart element or the page's main column), blank
(drawn 0 px wide), cut (a legend label ending in "…": a legend has no tooltip) or too pale (a line under 3:1 on white).
Charts drawn only after a Run click, or from a finished run, are run here on the smallest inputs that draw them."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from core.charts import layout
from tests.browser.conftest import assert_no_streamlit_exception, run_study_on_sidebar_model, screenshot, wait_for_app
from tests.chart_geometry import contrast_on_white

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."  # 14+ tokens with [CLS]/[SEP]

MEASURE = """(el) => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]').getBoundingClientRect();
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('svg');
  const read = (n) => { const r = n.getBoundingClientRect();
    const turn = (n.getAttribute('transform') || '').match(/rotate\((-?[\d.]+)/);
    return {text: n.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom,
            rotated: ['rotate(-90)', 'rotate(90)', 'rotate(270)'].some(a => (n.getAttribute('transform') || '').includes(a)),
            angle: turn ? parseFloat(turn[1]) : 0, size: parseFloat(getComputedStyle(n).fontSize) || 0}; };
  return {
    svg: !!svg,
    shown: el.checkVisibility(),  // false inside a closed expander or another tab: not seen, not measured
    box: {l: box.left, r: box.right, t: box.top, b: box.bottom},
    main: {l: main.left, r: main.right},
    titles: [...el.querySelectorAll('.role-title-text text, .role-title-subtitle text, .role-axis-title text')].map(read),
    labels: [...el.querySelectorAll('.role-axis-label text, .mark-text.role-mark text, .role-legend-label text, .role-header-label text')].map(read),
    legend: [...el.querySelectorAll('.role-legend-label text')].map(n => n.textContent),
    // the stroke of each drawn line (one per series of a line chart): proof that a series is on screen, and in what colour
    lines: [...el.querySelectorAll('.mark-line.role-mark path')].filter(p => (p.getAttribute('d') || '').length > 2)
      .map(p => getComputedStyle(p).stroke),
    // each legend symbol as drawn: a dash legend's "stroke" symbol with no stroke is a name beside nothing
    symbols: [...el.querySelectorAll('.role-legend-symbol path')].map(p => { const s = getComputedStyle(p);
      return {d: p.getAttribute('d') || '', fill: s.fill, stroke: s.stroke, width: parseFloat(s.strokeWidth) || 0}; }),
  };
}"""


def measure(page) -> list[dict]:
    # any chart on screen (the first may sit in a tab not shown)
    page.locator('[data-testid="stVegaLiteChart"] svg, [data-testid="stVegaLiteChart"] canvas').filter(visible=True).first.wait_for()
    page.wait_for_timeout(500)  # vega draws after the element appears
    return [chart.evaluate(MEASURE) for chart in page.locator('[data-testid="stVegaLiteChart"]').all()]


def token_rows(chart: dict) -> list[float]:
    """Centres of the token labels ("3·the") in the left-hand column: the y axis, or the head view's queries."""
    tokens = [t for t in chart["labels"] if "·" in t["text"] and t["text"].split("·")[0].isdigit()]
    if not tokens:
        return []
    right = sorted(round(t["r"]) for t in tokens)[0]
    return sorted({round((t["t"] + t["b"]) / 2, 1) for t in tokens if abs(t["r"] - right) <= 2})


def assert_not_clipped(chart: dict, name: str) -> None:
    box, main = chart["box"], chart["main"]
    for kind in ("titles", "labels"):
        for t in chart[kind]:
            # 2 px: a text box spans its glyphs' advance widths, the last glyph's ink ends inside it; a rotated text
            # (a y axis title) lies on its side, so its line box's top quarter lies across, left of its glyphs
            across = 1 + 0.25 * (t["r"] - t["l"]) if t["rotated"] else 2
            assert t["l"] >= box["l"] - across and t["r"] <= box["r"] + 2, \
                f"{name}: {kind[:-1]} {t['text']!r} cut at the chart's edge ({t['l']:.0f}..{t['r']:.0f} px, chart {box['l']:.0f}..{box['r']:.0f})"
            assert t["r"] <= main["r"] + 1, f"{name}: {kind[:-1]} {t['text']!r} runs off the page's right edge"
            # a text's box is its line box: the glyphs sit inside it, up to a quarter of its height in from the top
            slack = 1 + 0.25 * (t["b"] - t["t"])
            assert t["t"] >= box["t"] - slack and t["b"] <= box["b"] + slack, f"{name}: {kind[:-1]} {t['text']!r} cut at top/bottom"


def assert_rows(chart: dict, name: str, n_tokens: int | None, row_px: float) -> None:
    """Token rows at least row_px apart; with n_tokens, exactly that many rows labelled."""
    rows = token_rows(chart)
    assert n_tokens is None or len(rows) == n_tokens, f"{name}: {len(rows)} of {n_tokens} token rows labelled"
    gap = min(b - a for a, b in zip(rows, rows[1:]))
    assert gap >= row_px - 0.6, f"{name}: token rows {gap:.1f} px apart, squeezed below {row_px} px"


@pytest.fixture(scope="module")
def n_tokens(browser_model) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(browser_model)(SENTENCE)["input_ids"])


VIEWS = {
    "heatmap": ("attention", {"layer": 2, "heads": 0, "style": "Heatmap"}),
    "head_view_lines": ("attention", {"layer": 2, "heads": 0, "style": "Lines"}),
    "neuron_view": ("attention", {"tab": "Inside a head", "inside_layer": 2, "inside_head": 0, "inside_query": 1}),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_token_charts_on_screen_are_neither_squeezed_nor_clipped(page, app_url, view, n_tokens):
    path, params = VIEWS[view]
    page.goto(f"{app_url}/{path}?{urlencode({'a': SENTENCE, **params})}")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    charts = [c for c in measure(page) if c["svg"]]
    page.locator('[data-testid="stVegaLiteChart"]').last.scroll_into_view_if_needed()
    screenshot(page, f"layout_{view}")
    token_charts = [c for c in charts if token_rows(c)]
    assert token_charts, f"{view}: no chart with token labels drawn as SVG"
    for chart in token_charts:
        assert_rows(chart, view, n_tokens, layout.MIN_ROW_PX)
    assert_whole(charts, view)


def test_presenter_first_slide_heatmap_is_large_and_whole(page, app_url, browser_model):
    from transformers import AutoTokenizer

    from core import lessons

    step = lessons.builtin()["bert-in-ten-views"].steps[0]
    expected = len(AutoTokenizer.from_pretrained(browser_model)(step.params["a"])["input_ids"])
    page.goto(f"{app_url}/present?lesson=bert-in-ten-views&step=1")
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    charts = [c for c in measure(page) if c["svg"] and token_rows(c)]
    page.locator('[data-testid="stVegaLiteChart"]').first.scroll_into_view_if_needed()
    screenshot(page, "layout_presenter_slide_1")
    assert charts, "slide 1 draws no token chart"
    assert_rows(charts[0], "presenter slide 1", expected, round(layout.MIN_ROW_PX * layout.PRESENTATION_SCALE))
    assert_not_clipped(charts[0], "presenter slide 1")
    # Emoji need an emoji font, which many classroom machines (and this one) lack: they were drawn as □.
    text = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
    emoji = [c for c in text if 0x2600 <= ord(c) <= 0x27BF or 0x1F300 <= ord(c) <= 0x1FAFF or 0x2B00 <= ord(c) <= 0x2BFF]
    assert not emoji, f"emoji on the slide: {emoji}"


SENTENCE_NAME = re.compile(r"\d+: .{40}…")


def assert_whole(charts: list[dict], name: str) -> None:
    problems = chart_problems(charts, name)
    assert not problems, problems


def chart_problems(charts: list[dict], name: str, row_px: float = layout.MIN_ROW_PX) -> list[str]:
    """What is clipped or squeezed among a page's SVG charts (token rows counted view by view elsewhere)."""
    problems = []
    for i, chart in enumerate(c for c in charts if c["svg"]):
        if not chart["shown"]:
            continue
        try:
            # a chart in panels given `autosize: fit` was drawn 0 px wide: blank, its labels all "outside" it
            assert chart["box"]["r"] - chart["box"]["l"] >= 50, f"{name} chart {i}: drawn {chart['box']['r'] - chart['box']['l']:.0f} px wide"
            assert_not_clipped(chart, f"{name} chart {i}")
            # a legend label has no tooltip: words cut with "…" there are lost (axis labels keep theirs in one);
            # a sentence's name (core.charts.pca.sentence_names) is cut at 40 characters on purpose
            cut = [t for t in chart["legend"] if t.endswith("…") and not SENTENCE_NAME.fullmatch(t)]
            assert not cut, f"{name} chart {i}: legend label {cut[0]!r} cut short"
            blank = [s["d"] for s in chart["symbols"] if not symbol_drawn(s)]
            assert not blank, f"{name} chart {i}: {len(blank)} legend symbols drawn as nothing ({blank[0]})"
            width = chart["box"]["r"] - chart["box"]["l"]
            assert width >= layout.MIN_CHART_PX, f"{name} chart {i}: {width:.0f} px wide, under {layout.MIN_CHART_PX}"
            if len(token_rows(chart)) > 1:
                assert_rows(chart, f"{name} chart {i}", None, row_px)
        except AssertionError as err:
            problems.append(str(err).splitlines()[0])
    return problems


def symbol_drawn(symbol: dict) -> bool:
    """A legend symbol shows: a visible stroke, or a visible fill of a shape with an area (not one segment)."""
    def visible(colour: str) -> bool:
        return colour not in ("none", "transparent", "") and not re.fullmatch(r"rgba\(.*,\s*0\)", colour)

    segment = len(re.findall(r"[A-Za-z]", symbol["d"])) <= 2 and not re.search(r"[AaZzCcQq]", symbol["d"])
    return (visible(symbol["stroke"]) and symbol["width"] > 0) or (visible(symbol["fill"]) and not segment)


APP_VIEWPORT = {"width": 1440, "height": 900}  # issue 48: the app as a laptop shows it
PRESENTER_VIEWPORT = {"width": 1280, "height": 720}  # and presenter mode as a projector does


def test_every_page_draws_its_charts_whole(page, app_url):
    """Every page of the router, opened with the same sentence at 1440x900: no chart is clipped, narrow, or
    squeezed, and no legend names a series beside nothing."""
    from tests.browser.conftest import page_url_paths

    page.set_viewport_size(APP_VIEWPORT)
    problems = []
    for path in page_url_paths():
        if path == "present":
            continue  # measured above, slide by slide
        page.goto(f"{app_url}/{path}?{urlencode({'a': SENTENCE})}")
        wait_for_app(page)
        assert_no_streamlit_exception(page)
        if not page.locator('[data-testid="stVegaLiteChart"]').count():
            continue  # a page that waits for a Run click or a run: nothing drawn to measure yet
        charts = measure(page)
        screenshot(page, f"layout_page_{path}")
        problems += chart_problems(charts, path)
    assert not problems, "\n".join(problems)


def wait_for_slide(page) -> None:
    """wait_for_app for presenter mode, whose sidebar is in the page but hidden."""
    page.wait_for_selector('[data-testid="stSidebar"]', state="attached")
    page.wait_for_timeout(500)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                           " && !document.querySelector('[data-stale=\"true\"]')", timeout=240_000)
    page.wait_for_timeout(300)


def test_presenter_slides_draw_their_charts_whole_at_1280x720(page, app_url):
    """Issue 48: every slide of the built-in lessons at a projector's 1280x720: no chart is clipped or narrow, no
    token chart squeezed (rows scaled as presenter mode scales them), no legend symbol blank."""
    from core import lessons

    page.set_viewport_size(PRESENTER_VIEWPORT)
    problems = []
    for name, lesson in lessons.builtin().items():
        for number in range(1, len(lesson.steps) + 1):
            page.goto(f"{app_url}/present?{urlencode({'lesson': name, 'step': number})}")
            wait_for_slide(page)
            assert_no_streamlit_exception(page)
            if not page.locator('[data-testid="stVegaLiteChart"]').count():
                continue  # a slide with no chart (text, or a run that is not on this computer)
            charts = measure(page)
            page.locator('[data-testid="stVegaLiteChart"]').filter(visible=True).first.scroll_into_view_if_needed()
            screenshot(page, f"layout_presenter_{name}_{number}")
            problems += chart_problems(charts, f"{name} slide {number}", row_px=round(layout.MIN_ROW_PX * layout.PRESENTATION_SCALE))
    assert not problems, "\n".join(problems)


# Issue 48's charts on a tiny masked-language model (opened through ?model=): the patching heatmaps, the masked-word
# guesses (two masks), the layer lens under a short sentence. (page, params, text the finished page shows)
TINY_MLM_VIEWS = {
    "patching": ("attention", {"tab": "What causes it?", "target": "bank",
                               "clean": "the woman sat on the river [MASK] and the girl ran to the house .",
                               "corrupt": "the man sat on the river [MASK] and the boy ran to the house ."},
                 "Click a head to open it"),
    "masked guesses": ("masked", {"a": "the [MASK] sat on the [MASK] ."}, "The model's guesses"),
    "layer lens": ("layers", {"a": "the cat sat"}, "Top guess at every layer and token"),
}


@pytest.mark.parametrize("view", list(TINY_MLM_VIEWS))
def test_issue_48_charts_fit_the_screen(page, app_url, tmp_path, view):
    """Issue 48 at 1440x900: patching heatmaps ~130 px wide with overprinted token labels, a 270 x 100 px guesses
    chart, the lens legend's "0%" cut off. Each chart here is at least MIN_CHART_PX wide, nothing is cut, every
    legend symbol is drawn and a heatmap's column labels lie a line apart. (Presenter mode's larger type: the
    slides test above and tests/unit/test_chart_layout.py.)"""
    from tests.tiny_mlm import make_tiny_mlm

    folder = make_tiny_mlm(tmp_path / "tiny-mlm", layers=4)
    path, params, done = TINY_MLM_VIEWS[view]
    page.set_viewport_size(APP_VIEWPORT)
    page.goto(f"{app_url}/{path}?{urlencode({'model': str(folder), **params})}")
    wait_for_app(page)
    page.get_by_text(done).first.wait_for(timeout=180_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    charts = measure(page)
    shown = [c for c in charts if c["svg"] and c["shown"]]
    assert shown, f"{view}: no chart drawn"
    page.locator('[data-testid="stVegaLiteChart"]').first.scroll_into_view_if_needed()
    screenshot(page, f"layout_issue48_{view.replace(' ', '_')}")
    assert_whole(charts, view)
    for chart in shown:
        assert_columns_apart(chart, view)


def assert_columns_apart(chart: dict, name: str) -> None:
    """Slanted or upright labels along a horizontal axis ("3·the" under a heatmap) lie at least a line (1.2 em)
    apart across their direction: at -45° and 16 px columns "8·." was drawn over "9·[SEP]"."""
    import math

    turned = sorted((t for t in chart["labels"] if t["angle"] and "·" in t["text"]), key=lambda t: t["l"])
    for a, b in zip(turned, turned[1:]):
        if abs(a["angle"]) != abs(b["angle"]):
            continue
        across = ((b["l"] + b["r"]) - (a["l"] + a["r"])) / 2 * abs(math.sin(math.radians(a["angle"])))
        assert across >= 1.2 * a["size"] - 0.6, \
            f"{name}: labels {a['text']!r} and {b['text']!r} {across:.1f} px apart at {a['angle']}°"


# ---- charts drawn only after a Run click, or from a finished run ----------------------------------------------
# The page sweep above finds no chart on these pages: each is run here on the smallest input that draws it.


def run_and_measure(page, name: str, done) -> list[dict]:
    """Wait for `done` (a locator the finished run shows), then measure every chart and save a screenshot."""
    done.wait_for(state="attached", timeout=240_000)
    wait_for_app(page)
    assert_no_streamlit_exception(page)
    charts = measure(page)
    screenshot(page, f"layout_run_{name}")
    return charts


def tall(page, height: int = 3000) -> None:
    """Streamlit scrolls inside its own container, so a full-page shot shows the viewport only: make it tall."""
    page.set_viewport_size({"width": 1400, "height": height})


def test_heads_over_a_dataset_charts_are_whole_with_both_cls_series(page, app_url):
    tall(page)
    page.goto(f"{app_url}/attention?{urlencode({'tab': 'Heads over a dataset', 'heads_n': 6, 'stat': 'cls', 'pairs_n': 10})}")
    wait_for_app(page)
    page.get_by_role("button", name=re.compile(r"Run .* over 6 examples")).click()
    charts = run_and_measure(page, "heads_over_a_dataset", page.get_by_text(re.compile(r"6 inputs \(6 pairs")))
    assert_whole(charts, "heads over a dataset")
    per_layer = [c for c in charts if any(t["text"].startswith("Mean attention to [CLS] per layer") for t in c["titles"])]
    assert len(per_layer) == 1, [c["titles"] for c in charts]
    legend = [t["text"] for t in per_layer[0]["labels"] if t["text"].startswith("measured: ") or "Clark" in t["text"]]
    assert any(t.startswith("measured: ") for t in legend) and any("Clark" in t for t in legend), legend
    strokes = per_layer[0]["lines"]
    assert len(strokes) == 2, f"{len(strokes)} of 2 lines (measured MiniLM, Clark's) drawn"
    for stroke in strokes:  # "the measured MiniLM series missing": it was drawn in pale #83c9ff, 1.8:1 on white
        assert contrast_on_white(stroke) >= 3, f"a line drawn in {stroke}, too pale to see"

    # the paraphrase heads below it: one grid per direction
    page.get_by_role("button", name="Measure 10 MRPC pairs").click()
    charts = run_and_measure(page, "paraphrase_heads", page.locator('[data-testid="stVegaLiteChart"]').nth(2))
    assert len([c for c in charts if c["svg"] and c["shown"]]) >= 3, "the two statistics charts and the paraphrase heads"
    assert_whole(charts, "paraphrase heads")

    # the same pass, its pattern types: the dominant type per head, the shares, the example maps
    page.get_by_role("radio", name="Pattern types").or_(page.get_by_role("button", name="Pattern types")).first.click()
    charts = run_and_measure(page, "heads_pattern_types", page.get_by_text("Example maps of each type"))
    assert len([c for c in charts if c["svg"] and c["shown"]]) >= 2, "the pattern grid and the example maps"
    assert_whole(charts, "pattern types")


def test_anisotropy_chart_is_whole(page, app_url):
    tall(page)
    # 59 sentences: a pass no other browser test runs, so its result is not already held by the shared server
    page.goto(f"{app_url}/anisotropy?{urlencode({'limit': 59})}")
    wait_for_app(page)
    page.get_by_role("button", name="Run on 1 model").click()
    charts = run_and_measure(page, "anisotropy", page.locator('[data-testid="stVegaLiteChart"] svg').first)
    assert charts, "anisotropy: no chart drawn"
    assert_whole(charts, "anisotropy")


def test_pca_scatter_and_variance_are_whole(page, app_url):
    tall(page)
    page.goto(f"{app_url}/pca")
    wait_for_app(page)
    page.get_by_role("button", name="“bank” in three senses, one input each").click()
    charts = run_and_measure(page, "pca", page.get_by_text("Share of each layer's variance on the two axes").first)
    assert len([c for c in charts if c["svg"]]) >= 2, "the scatter and the variance chart"
    assert_whole(charts, "pca")


# visbert: measured numbers only (a panel per series); ethayarajh: the paper's per-layer numbers beside MiniLM's
REPRODUCED = {"visbert": "No published numbers to compare with", "ethayarajh": "Paper vs measured, every number"}


@pytest.mark.parametrize("study", list(REPRODUCED))
def test_reproduce_small_multiples_are_whole(page, app_url, study):
    tall(page)
    page.goto(f"{app_url}/reproduce?study={study}")
    wait_for_app(page)
    run_study_on_sidebar_model(page, 40)
    page.get_by_text(REPRODUCED[study]).first.wait_for(timeout=240_000)
    charts = run_and_measure(page, f"reproduce_{study}", page.locator('[data-testid="stVegaLiteChart"] svg').first)
    pale = [s for c in charts for s in c["lines"] if contrast_on_white(s) < 3]
    assert not pale, f"lines drawn in {sorted(set(pale))}, too pale to see"
    assert charts, "reproduce: no chart drawn"
    assert_whole(charts, "reproduce")


def test_explain_faithfulness_chart_is_whole(page, app_server, app_url, tmp_path):
    from tests.integration.test_explain import make_seq_classifier

    tall(page)
    folder = make_seq_classifier(tmp_path / "seqcls")
    page.goto(f"{app_url}/explain?{urlencode({'model': str(folder), 'a': 'the cat sat on the mat', 'b': 'a dog ran'})}")
    wait_for_app(page)
    examples = page.get_by_label(re.compile(r"^Examples to score"))
    examples.fill("5")
    examples.press("Enter")
    wait_for_app(page)
    steps = page.get_by_label("IG steps", exact=True)  # not the explanation's "Integrated-gradients steps"
    steps.fill("5")
    steps.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name="Score the methods").click()
    axis = "p(class | x) − p(class | perturbed)"  # the faithfulness chart's y axis: drawn when the scores are in
    charts = run_and_measure(page, "explain_faithfulness", page.locator("svg text", has_text=axis).first)
    faithfulness = [c for c in charts if any(t["text"] == axis for t in c["titles"])]
    assert len(faithfulness) == 1 and faithfulness[0]["shown"], "the faithfulness chart is not on screen"
    assert_whole(charts, "explain")


def test_bias_results_charts_are_whole(page, app_server, app_url, data_dir, monkeypatch):
    """The results of a finished experiment, its predictions made up (tests.app.test_bias_page: no training)."""
    import shutil

    from core import bias
    from tests.app.test_bias_page import write_finished_experiment

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))  # the server's own cache folder
    tall(page, 5400)
    write_finished_experiment("bias-browser-layout")
    try:
        page.goto(f"{app_url}/bias?experiment=bias-browser-layout")
        wait_for_app(page)
        charts = run_and_measure(page, "bias_results", page.get_by_text("Training pairs removed").first)
        assert len([c for c in charts if c["svg"]]) >= 3, "the word counts, the accuracies and the flips"
        assert_whole(charts, "bias")
    finally:  # the server is shared by the session's browser tests: leave its cache as it was
        shutil.rmtree(bias.experiment_dir("bias-browser-layout"))


def test_finetune_results_charts_are_whole(page, app_server, app_url, tiny_bert_dir, tmp_path, monkeypatch):
    """A finished classification run of the tiny random BERT (a few seconds), as tests/browser/test_finetune.py."""
    from core.training import Recipe, finetune
    from core.training.runs import delete_run

    monkeypatch.setenv("BERTLENS_CACHE", str(app_server.log.parent))
    data = tmp_path / "animals.csv"
    data.write_text("text,label\n" + "".join(f"the {a} sat on the mat,{a}\n" for a in ["cat", "dog"] * 24))
    finetune(Recipe(model=str(tiny_bert_dir), task=str(data), run_name="browser-layout", epochs=1, lr=2e-3,
                    batch_size=16, max_length=16, cpu_threads=1))
    try:
        tall(page)
        page.goto(f"{app_url}/finetune?{urlencode({'runs': 'browser-layout'})}")
        wait_for_app(page)
        charts = run_and_measure(page, "finetune_results", page.get_by_text("Confusion matrices").first)
        assert charts, "finetune: no chart drawn"
        assert_whole(charts, "finetune")
    finally:
        delete_run("browser-layout")


def test_explorer_neighbours_and_their_tags_are_whole(page, app_url):
    """The nearest contexts of a word in 50 UD EWT sentences, and the POS / relation counts of the matches (panels by
    a column encoding: drawn 0 px wide before draw_chart gave such a chart its own size)."""
    tall(page)
    page.goto(f"{app_url}/explorer?{urlencode({'a': SENTENCE, 'tab': 'Nearest contexts', 'neighbours_corpus': 'ud:dev', 'neighbours_n': 50})}")
    wait_for_app(page)
    page.get_by_role("button", name="Build / open the corpus index").click()
    page.locator("svg text", has_text="POS and relation of the matches").first.wait_for(state="attached", timeout=240_000)
    wait_for_app(page)
    # issue 37: the reruns after the build keep this tab open (st.tabs reopened the Projector, hiding the result)
    assert page.get_by_role("button", name="Build / open the corpus index").is_visible()
    charts = run_and_measure(page, "explorer_neighbours", page.get_by_text("Exact search").first)
    assert len([c for c in charts if c["svg"] and c["shown"]]) >= 2, "the neighbours and their tags"
    assert_whole(charts, "explorer")

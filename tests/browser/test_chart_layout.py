"""Charts measured on screen: each view's drawn SVG (Streamlit draws small charts as SVG) read back with the
browser's own geometry. A chart fails when it is squeezed (a token row thinner than core.charts.layout.MIN_ROW_PX,
or a token label not drawn) or clipped (a title or label outside the chart element or the page's main column)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from core.charts import layout
from tests.browser.conftest import assert_no_streamlit_exception, screenshot, wait_for_app

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."  # 14+ tokens with [CLS]/[SEP]

MEASURE = """(el) => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]').getBoundingClientRect();
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('svg');
  const read = (n) => { const r = n.getBoundingClientRect();
    return {text: n.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  return {
    svg: !!svg,
    box: {l: box.left, r: box.right, t: box.top, b: box.bottom},
    main: {l: main.left, r: main.right},
    titles: [...el.querySelectorAll('.role-title-text text, .role-title-subtitle text')].map(read),
    labels: [...el.querySelectorAll('.role-axis-label text, .mark-text.role-mark text')].map(read),
  };
}"""


def measure(page) -> list[dict]:
    page.wait_for_selector('[data-testid="stVegaLiteChart"] svg, [data-testid="stVegaLiteChart"] canvas')
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
            # 2 px: a text box spans its glyphs' advance widths, the last glyph's ink ends inside it
            assert t["l"] >= box["l"] - 2 and t["r"] <= box["r"] + 2, f"{name}: {kind[:-1]} {t['text']!r} cut at the chart's edge"
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
    for chart in charts:
        assert_not_clipped(chart, view)


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


def test_every_page_draws_its_charts_whole(page, app_url):
    """Every page of the router, opened with the same sentence: no chart is clipped, no token chart squeezed."""
    from tests.browser.conftest import page_url_paths

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
        for i, chart in enumerate(c for c in charts if c["svg"]):
            name = f"{path} chart {i}"
            try:
                assert_not_clipped(chart, name)
                if len(token_rows(chart)) > 1:  # tokens or words: the count is checked view by view above
                    assert_rows(chart, name, None, layout.MIN_ROW_PX)
            except AssertionError as err:
                problems.append(str(err).splitlines()[0])
    assert not problems, "\n".join(problems)

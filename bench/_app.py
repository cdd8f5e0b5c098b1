"""Shared by the app benches (issue 18): a bert-base-sized stand-in model, long inputs, the raw-forward baseline,
a `streamlit run` server and a Playwright browser on localhost.

The HF hub cannot be reached here, so bert-base itself cannot be downloaded: the stand-in is a randomly
initialised BertForMaskedLM with bert-base's config (12 layers, 12 heads, 768 wide, 110 M parameters) and
bert-base-uncased's vocabulary (MiniLM-L6 uses the same WordPiece vocabulary), saved as safetensors. Its weights
are random, so its attention patterns mean nothing, but every tensor has bert-base's shape: a fair stand-in
for timing and memory, not for any finding. Its query weights are scaled by 8: a random init attends almost
uniformly (no pair reaches the head view's 0.02 threshold, so the chart would draw no lines and look cheap),
while scaled it draws ~2,000-4,000 lines per head at 512 tokens, as a trained model does (MiniLM-L6's layer 2,
head 0: 4,216).
"""

from __future__ import annotations

import os
import random
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUT = REPO / "bench" / "out"  # git-ignored
QUERY_SCALE = 8  # see the module docstring


def minilm() -> Path:
    from core import settings

    return settings.data_dir() / "models" / "all-MiniLM-L6-v2"


def bert_base_stand_in(folder: Path | None = None) -> Path:
    """Build (once) the random-init bert-base-sized model described above; returns its folder."""
    folder = Path(folder or OUT / "bert-base-peaked")
    if (folder / "model.safetensors").is_file():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig())  # BertConfig() defaults are bert-base-uncased's
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            layer.attention.self.query.weight.mul_(QUERY_SCALE)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(str(minilm())).save_pretrained(folder)
    return folder


def resolve_model(name: str) -> str:
    return str(bert_base_stand_in() if name == "bert-base-random" else minilm() if name == "minilm" else name)


def long_text(tokenizer, n_tokens: int = 512, seed: int = 0) -> str:
    """A text of exactly n_tokens word pieces with [CLS] and [SEP] (so no truncation): random whole vocabulary
    words, a different text per seed."""
    vocab = [w for w in tokenizer.get_vocab() if w.isalpha() and w.islower() and len(w) > 2]
    vocab.sort()
    rng = random.Random(seed)
    words: list[str] = []
    while True:
        words.append(rng.choice(vocab))
        n = len(tokenizer(" ".join(words))["input_ids"])
        if n == n_tokens:
            return " ".join(words)
        if n > n_tokens:
            words.pop()


def raw_forward_seconds(lm, text: str, repeats: int = 3) -> float:
    """Tokenisation + one forward with attentions and hidden states (what the page needs), median of repeats."""
    import statistics

    import torch

    times = []
    for _ in range(repeats + 1):  # the first call (one-time allocations) is dropped
        start = time.perf_counter()
        batch = lm.tokenizer(text, truncation=True, return_tensors="pt").to(lm.device)
        with torch.inference_mode():
            lm.model(**batch, output_attentions=True, output_hidden_states=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def raw_forward(lm, sentences, batch: int, **wanted) -> None:
    """The corpus baseline: tokenizer + model(**batch) over the sentences, shortest first, `batch` at a time,
    asking only for what the pass compared with needs (`wanted`: output_attentions / output_hidden_states)."""
    import torch

    ordered = sorted(sentences, key=lambda s: len(lm.tokenizer(s)["input_ids"]))
    for start in range(0, len(ordered), batch):
        encoded = lm.tokenizer(ordered[start : start + batch], padding=True, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            lm.model(**encoded.to(lm.device), **wanted)


def median_seconds(fn, repeats: int) -> float:
    """fn() once as warm-up, then the median of `repeats` timed calls."""
    import statistics

    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def alternate(raw, ours, repeats: int) -> dict:
    """Baseline and candidate run in turn after one warm-up each (load drifts hit both); medians and their ratio.
    ratio_paired: the median of each turn's own raw / candidate, so a drift between turns cancels."""
    import statistics

    raw(), ours()  # warm-up
    base, cand = [], []
    for _ in range(repeats):
        for fn, samples in ((raw, base), (ours, cand)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    b, c = statistics.median(base), statistics.median(cand)
    paired = statistics.median(r / p for r, p in zip(base, cand))
    return {"raw_s": b, "pass_s": c, "ratio": round(b / c, 3), "ratio_paired": round(paired, 3)}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_line() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


@contextmanager
def served(model: str, extra_env: dict | None = None, repo: Path = REPO):
    """`streamlit run app.py` of `repo` on a free localhost port; yields (server, seconds from launch to HTTP 200)."""
    from tests.browser.conftest import StreamlitServer

    cache = OUT / "server-cache"
    cache.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    os.environ.update(extra_env or {})
    start = time.perf_counter()
    try:
        server = StreamlitServer(model, cache, repo=repo)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield server, time.perf_counter() - start
    finally:
        server.stop()


def warm_up_line(server) -> str:
    """The server's "warm-up done in …" log line (app_pages/shell/launch.py), or "" before it is written."""
    lines = [line for line in server.log.read_text(errors="replace").splitlines() if "warm-up done" in line]
    return lines[-1].split("warm-up done", 1)[1].strip() if lines else ""


@contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_FLAGS, chromium_path

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


CHART_DRAWN = ('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks')


def wait_for_chart(page, timeout_s: float = 300) -> None:
    """Until an altair chart has been drawn and Streamlit has finished the run."""
    page.wait_for_selector(CHART_DRAWN, timeout=timeout_s * 1000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_s * 1000)


def open_attention(browser, base_url: str, model: str, text: str, timeout_s: float = 300, keep=None) -> float:
    """A new session (browser context) opens the Attention page on `text`; seconds until the head view is drawn.
    The context is closed after, unless `keep` (a list) is given: the open page is appended to it."""
    from urllib.parse import quote

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(f"{base_url}/attention?model={quote(model)}&a={quote(text)}", timeout=timeout_s * 1000)
        wait_for_chart(page, timeout_s)
        seconds = time.perf_counter() - start
    except BaseException:
        context.close()
        raise
    if keep is None:
        context.close()
    else:
        keep.append(page)
    return seconds


# A fingerprint of what the head view shows now, or null while it shows no text (a new chart not yet drawn):
# as SVG (vega's choice for some charts), its first text marks (the first token labels, different for every
# sentence); as canvas, a hash of its top-left pixels. Small on purpose: polled every 10 ms, so it must not
# compete with the page for the CPU.
CHART_FINGERPRINT = """() => {
  const svg = document.querySelector('[data-testid="stVegaLiteChart"] svg.marks');
  if (svg) {
    const texts = [...svg.querySelectorAll('text')].slice(0, 12).map(t => t.textContent).join('|');
    return texts || null;
  }
  const canvas = document.querySelector('[data-testid="stVegaLiteChart"] canvas');
  if (!canvas || !canvas.width) return null;
  const w = Math.min(canvas.width, 600), h = Math.min(canvas.height, 240);
  const pixels = canvas.getContext('2d').getImageData(0, 0, w, h).data;
  let hash = 0, dark = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] > 128 && pixels[i] < 100) dark++;
    hash = (hash * 31 + pixels[i] + 7 * pixels[i + 3]) | 0;
  }
  return dark ? String(hash) : null;
}"""


def streamlit_log_times(log: str, since: float) -> list[tuple[float, float]]:
    """(end, seconds) of each "forward pass done" line the server logged after `since` (epoch seconds)."""
    import datetime
    import re

    found = []
    for stamp, seconds in re.findall(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) forward pass done in ([\d.]+) s", log):
        end = datetime.datetime.fromisoformat(stamp).timestamp()
        if end >= since:
            found.append((end, float(seconds)))
    return found


def warm_rerun(page, server, text: str, timeout_s: float = 120) -> dict:
    """In an open Attention page, type a new sentence (Ctrl+Enter): seconds to the new head view drawn, split by
    the server's log into before the forward, the forward itself, and after it (chart built, sent, drawn)."""
    before = page.evaluate(CHART_FINGERPRINT)
    box = page.get_by_label("Sentence A")
    box.fill(text)
    start = time.time()
    box.press("Control+Enter")
    deadline = start + timeout_s
    # The canvas is read only once the server has logged the forward's end: reading pixels while the forward runs
    # would take CPU from it on a 2-core machine.
    while time.time() < deadline and not streamlit_log_times(server.log.read_text(), start):
        time.sleep(0.01)
    while time.time() < deadline:
        now = page.evaluate(CHART_FINGERPRINT)
        if now is not None and now != before:
            break
        time.sleep(0.01)
    drawn = time.time()
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_s * 1000)
    finished = time.time()
    forwards = streamlit_log_times(server.log.read_text(), start)
    result = {"total_s": drawn - start, "run_finished_s": finished - start}
    if forwards:
        end, seconds = forwards[-1]
        result.update(before_forward_s=end - seconds - start, forward_s=seconds, after_forward_s=drawn - end)
    return result

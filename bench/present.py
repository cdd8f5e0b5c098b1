"""Presenter mode: is stepping instant once the lesson has been prepared?

    python bench/present.py [--quick]

Opens /present?lesson=bert-in-ten-views&step=1 in Streamlit's AppTest (the real app.py, the local MiniLM) and
times (1) the first open, which prepares every step (model load + forward pass of each step's sentences) and
(2) each "Next" after it. Baseline: the same step opened cold, as a fresh link after clearing Streamlit's caches
(model load + forward on demand). `--quick` times the first four steps (all on the local MiniLM) only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from core import lessons, views  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    lesson = lessons.builtin()["bert-in-ten-views"]
    n = 4 if args.quick else len(lesson.steps)

    # Warm-up: Python imports (torch, transformers, the pages) would otherwise land on the first timing.
    warm_up = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    warm_up.query_params.update(lesson.steps[0].params)
    warm_up.switch_page(views.page_file(lesson.steps[0].page)).run()
    cold = []
    for step in lesson.steps[1:n]:
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
        at.query_params.update(step.params)
        t = time.perf_counter()
        at.switch_page(views.page_file(step.page)).run()
        cold.append(time.perf_counter() - t)

    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    at.query_params.update({"lesson": "bert-in-ten-views", "step": "1"})
    t = time.perf_counter()
    at.switch_page("app_pages/present.py").run()
    first = time.perf_counter() - t
    warm = []
    for _ in range(1, n):
        t = time.perf_counter()
        at.button(key="present.next").click().run()
        warm.append(time.perf_counter() - t)
        assert not at.exception, at.exception
    print(f"first open (prepares every step): {first:.2f} s")
    for i, (c, w) in enumerate(zip(cold, warm), start=2):
        print(f"step {i:2d} {lesson.steps[i - 1].title[:34]:34s} cold link {c:6.2f} s   next in presenter {w:6.2f} s")


if __name__ == "__main__":
    main()

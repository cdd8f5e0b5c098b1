"""How long the real app takes, each figure beside the raw forward measured in the same run (issue 18).

    python bench/app_latency.py [--model bert-base-random|minilm|PATH] [--tokens 512] [--quick] [--no-browser] [--reruns N]
    python bench/app_latency.py --split-cores [--model …] [--tokens 512]
        only the end-to-end figures, with the browser on a core of its own: Chromium runs on one CPU and the server
        (and the raw forward it is compared with) on the other, one torch thread, as on a machine where the
        browser does not take the forward's cores (a laptop with more cores, or a student's browser on a
        classroom server)
    python bench/app_latency.py --cold-starts N [--open-after S] [--model …] [--tokens 512] [--against PATH]
        only the cold start: N fresh servers with the launch warm-up and N without (BERTLENS_WARM_UP=0),
        alternated; the page is opened S s after the launch (default 0: as soon as the server answers).
        --against PATH: instead of the no-warm-up arm, N servers of another checkout's app.py (the code before a
        change, e.g. `git archive HEAD~1 | tar -x -C PATH`), alternated with this one's: before/after in one run

Server side (Streamlit AppTest, in this process, model already loaded):
  new_sentence_s    a new sentence on the Attention page: rerun with forward, chart built and serialised
  chart_only_s      the same sentence, another head: the rerun after the forward (cached) -> chart ready
  heatmap_only_s    the same, drawn as a heatmap (one image past 96x96 cells)
End to end (`streamlit run` + Debian Chromium via Playwright, localhost):
  http_200_s        launch -> HTTP 200 on /_stcore/health
  cold_chart_s      launch -> the first session's head view drawn (Chromium already running; the server's
                    warm-up, app_pages/shell/launch.py, loads the default model = this model while the page loads)
  first_chart_s     the first session alone: page open -> head view drawn
  warm_chart_s      a second session, a new sentence, model loaded: page open -> head view drawn
  rerun_total_s     in that open page, a new sentence typed (Ctrl+Enter) -> the new head view drawn (its canvas
                    shows the new tokens); split by the server's "forward pass done" log line into
                    rerun_before_forward_s (websocket, script start, widgets, URL sync), rerun_forward_s (the
                    page's tokenisation + forward) and rerun_after_forward_s (chart built, sent and drawn)
Baseline: raw_forward_s = tokenisation + one forward with attentions and hidden states (median of 3), on the
same model and text; ratios = figure / raw.

--model bert-base-random (default) is a random-init model of bert-base's shape with peaked attention (see
bench/_app.py): bert-base cannot be downloaded here. --quick: 128-token inputs (unless --tokens is given), one repeat.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _app


def server_side(model: str, texts: list[str], repeats: int) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(_app.REPO / "app.py"), default_timeout=600)
    at.session_state["model"], at.session_state["sentence_a"], at.session_state["sentence_b"] = model, "", ""
    at.switch_page("app_pages/attention.py").run()  # model load, no sentence yet
    new, chart, heat = [], [], []
    for i, text in enumerate(texts[:repeats]):
        at.session_state["sentence_a"] = text
        start = time.perf_counter()
        at.run()
        new.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        at.multiselect(key="attention.heads").set_value([1 + i % 3])
        start = time.perf_counter()
        at.run()
        chart.append(time.perf_counter() - start)
        at.radio(key="attention.style").set_value("Heatmap")
        start = time.perf_counter()
        at.run()
        heat.append(time.perf_counter() - start)
        at.radio(key="attention.style").set_value("Lines").run()
    rows = [r for r in at.get("vega_lite_chart")]
    return {"new_sentence_s": statistics.median(new), "chart_only_s": statistics.median(chart),
            "heatmap_only_s": statistics.median(heat), "charts_on_page": len(rows)}


def end_to_end(model: str, texts: list[str], repeats: int, browser_cpus=None, server_cpus=None) -> dict:
    """browser_cpus / server_cpus: the CPUs Chromium and the server run on (inherited from this process at their
    start); None: all of this process's."""
    import os

    everything = os.sched_getaffinity(0)
    os.sched_setaffinity(0, browser_cpus or everything)
    with _app.chromium() as browser:
        os.sched_setaffinity(0, server_cpus or everything)
        try:
            return _with_browser(browser, model, texts, repeats, lambda: os.sched_setaffinity(0, browser_cpus or everything))
        finally:
            os.sched_setaffinity(0, everything)


def _with_browser(browser, model: str, texts: list[str], repeats: int, launched_hook) -> dict:
    with _app.served(model) as (server, http_200):
        launched_hook()  # this process's own polling then runs beside the browser, not the server
        launched = time.perf_counter() - http_200  # the server's launch: Chromium was started before it
        first = _app.open_attention(browser, server.url, model, texts[0])
        cold = time.perf_counter() - launched
        kept: list = []
        warm = _app.open_attention(browser, server.url, model, texts[1], keep=kept)
        reruns = [_app.warm_rerun(kept[0], server, text) for text in texts[2 : 2 + repeats]]
    result = {"http_200_s": http_200, "cold_chart_s": cold, "first_chart_s": first, "warm_chart_s": warm}
    for key in reruns[0]:
        values = [r[key] for r in reruns if key in r]
        result[f"rerun_{key}"] = statistics.median(values)
    result["rerun_samples"] = reruns
    return result


def cold_starts(model: str, text: str, count: int, open_after: float = 0.0, against: str | None = None) -> dict:
    """`count` fresh servers with the launch warm-up and `count` without (BERTLENS_WARM_UP=0), alternated, one
    browser: launch -> HTTP 200, launch -> first head view, and page open -> first head view, each time. The page
    is opened `open_after` seconds after the launch (0: as soon as the server answers). against: a checkout whose
    servers (warm-up on) replace the no-warm-up arm."""
    from pathlib import Path

    arms = ((("warm_up", "1", _app.REPO), ("no_warm_up", "0", _app.REPO)) if against is None else
            (("warm_up", "1", _app.REPO), ("against", "1", Path(against).resolve())))
    samples: dict[str, list] = {arm: [] for arm, _, _ in arms}
    with _app.chromium() as browser:
        for _ in range(count):
            for arm, flag, repo in arms:
                launched = time.perf_counter()
                with _app.served(model, {"BERTLENS_WARM_UP": flag}, repo) as (server, http_200):
                    time.sleep(max(0.0, launched + open_after - time.perf_counter()))
                    opened = _app.open_attention(browser, server.url, model, text)
                    samples[arm].append({"http_200_s": http_200, "cold_chart_s": time.perf_counter() - launched,
                                         "open_to_chart_s": opened, "warm_up": _app.warm_up_line(server)})
    result = {}
    for arm, runs in samples.items():
        suffix = "" if arm == "warm_up" else f"_{arm}"
        result[f"cold_chart{suffix}_s"] = statistics.median(r["cold_chart_s"] for r in runs)
        result[f"open_to_chart{suffix}_s"] = statistics.median(r["open_to_chart_s"] for r in runs)
    result["http_200_s"] = statistics.median(r["http_200_s"] for runs in samples.values() for r in runs)
    result["cold_samples"] = samples
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert-base-random")
    parser.add_argument("--tokens", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--split-cores", action="store_true", help="browser on one CPU, server and raw forward on another")
    parser.add_argument("--reruns", type=int, default=0, metavar="N", help="warm reruns in the open page (default: the repeats, 3)")
    parser.add_argument("--cold-starts", type=int, default=0, metavar="N")
    parser.add_argument("--open-after", type=float, default=0.0, metavar="S", help="with --cold-starts: open the page S s after launch")
    parser.add_argument("--against", default=None, metavar="PATH", help="with --cold-starts: another checkout's app.py as the second arm")
    args = parser.parse_args()
    tokens = args.tokens or (128 if args.quick else 512)
    repeats = 1 if args.quick else 3
    args.reruns = args.reruns or repeats
    model = _app.resolve_model(args.model)

    from core.model.loading import load_model

    lm = load_model(model)
    texts = [_app.long_text(lm.tokenizer, tokens, seed) for seed in range(repeats + args.reruns + 3)]
    if args.split_cores:
        import os

        import torch

        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("--split-cores needs two CPUs")
        browser_cpus, server_cpus = {cpus[-1]}, set(cpus[:-1])
        os.sched_setaffinity(0, server_cpus)
        torch.set_num_threads(len(server_cpus))
        raw = _app.raw_forward_seconds(lm, texts[0])
        os.sched_setaffinity(0, set(cpus))
        result = {"model": args.model, "tokens": tokens, "raw_forward_s": raw, "device": lm.device,
                  "browser_cpus": sorted(browser_cpus), "server_cpus": sorted(server_cpus)}
        del lm
        result.update(end_to_end(model, texts[repeats + 1 :], args.reruns, browser_cpus, server_cpus))
        _print_with_ratios(result, raw)
        return
    raw = _app.raw_forward_seconds(lm, texts[0])
    result = {"model": args.model, "tokens": tokens, "raw_forward_s": raw, "device": lm.device}
    del lm
    if args.cold_starts:
        load_before = _app.load_line()
        result.update(cold_starts(model, texts[-1], args.cold_starts, args.open_after, args.against))
        result["load_before"], result["load"] = load_before, _app.load_line()
        print(json.dumps(result, indent=1))
        return
    result.update(server_side(model, texts[1:], repeats))
    if not args.no_browser:
        result.update(end_to_end(model, texts[repeats + 1 :], args.reruns))
    _print_with_ratios(result, raw)


def _print_with_ratios(result: dict, raw: float) -> None:
    result["load"] = _app.load_line()
    for key, value in list(result.items()):
        if key.endswith("_s") and key not in ("raw_forward_s", "rerun_forward_s"):
            result[key.removesuffix("_s") + "_ratio"] = round(value / raw, 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

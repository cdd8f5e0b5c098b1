"""A live class answering one question (issue 36): every answer stored once, the teacher's count complete soon after
the last answer, the server's memory within budget.

    python bench/live_class.py [--students 60] [--spread 8] [--model tiny|bert-base-random|PATH] [--quick]

One `streamlit run app.py` in class mode on localhost (BERTLENS_CLASS=1; BERTLENS_TEACHER_ADDRESSES=127.0.0.1,::1),
so the teacher is one headless Chromium page on localhost and `--students` bare websocket sessions connecting from
127.0.0.2 (bench/classroom_load.py's driver: Streamlit's own protocol, no browser per student) are students. The
bench asks a masked-word question on the class the server opened (core.classroom.questions from the model's own
guesses, through the same SQLite file), the teacher's page (Masked words) shows it with its live count, and each
student joins by the link's class code and presses one choice (student i picks choice i mod n), the first
starting at 0 s and the last at `--spread` s, once the server's warm-up is done. Printed: answers stored (and each device once), the answers per
choice against those sent, the time from the first join to the last "Answer received", the time from that last
acknowledgement to the teacher's page showing the full count, each student's time from join to "Answer received"
(median, max), and the server's peak RSS (children included,
sampled every 0.2 s) beside the budget (encoding cache budget + the model's bytes), with the load average.
--quick: 6 students over 2 s. Model "tiny": tests/tiny_mlm.py's random BertForMaskedLM (built under bench/out/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import _app
import classroom_load

STUDENT_ADDRESS = "127.0.0.2"  # a loopback address that is not the teacher's: the server sees a student
TEACHER_ADDRESSES = "127.0.0.1,::1"
TEXT = "the girl sat on the [MASK] of the river ."
# The open question's count (the sidebar's class panel has a "Students" metric too)
ANSWERS = ("() => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
           ".filter(m => m.innerText.includes('Answers received'))"
           ".map(m => m.querySelector('[data-testid=\"stMetricValue\"]').innerText.trim())[0] || null")


def tiny_model() -> str:
    from tests.tiny_mlm import make_tiny_mlm

    folder = _app.OUT / "tiny-mlm-class"
    return str(folder if (folder / "model.safetensors").is_file() else make_tiny_mlm(folder))


def ask(store, model: str):
    """The class the server opened, asked the masked-word question on TEXT; (class info, question id, question)."""
    from core.analyses.masked import fill_mask
    from core.classroom.questions import masked_word_question
    from core.model.loading import load_model

    lm = load_model(model, masked_lm=True)
    question = masked_word_question(fill_mask(lm, TEXT, top_k=12), spell=lm.tokenizer.convert_tokens_to_string)
    info = store.active_class()
    return info, store.ask(info.id, question), question


def students(base_url: str, code: str, choices, n: int, spread: float, timeout: float):
    """n websocket students join by the class code and press choice i mod len(choices); per student the time the
    join was sent and the time "Answer received" came back (None when it never did), and any errors."""
    from core.safe_text import markdown_text

    started, acknowledged, errors = [None] * n, [None] * n, []

    async def one(i: int) -> None:
        await asyncio.sleep(i * spread / max(n - 1, 1))
        label = markdown_text(choices[i % len(choices)])
        async with classroom_load.connect(base_url, timeout, STUDENT_ADDRESS) as ws:
            started[i] = time.perf_counter()
            await ws.send(classroom_load.rerun_message({"class": code}))
            deltas = await classroom_load.read_run(ws)
            button = next(d for d in deltas if d.new_element.WhichOneof("type") == "button"
                          and d.new_element.button.label == label)
            await ws.send(classroom_load.rerun_message({"class": code}, widgets=[classroom_load.button_press(
                button.new_element)], fragment_id=button.fragment_id))
            for delta in await classroom_load.read_run(ws):
                element = delta.new_element
                if element.WhichOneof("type") == "alert" and "Answer received" in element.alert.body:
                    acknowledged[i] = time.perf_counter()

    async def everyone() -> None:
        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True), timeout)
        errors.extend(repr(r) for r in results if isinstance(r, BaseException))

    asyncio.run(everyone())
    return started, acknowledged, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--spread", type=float, default=8.0, help="seconds between the first and last student's join")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = min(6 if args.quick else args.students, classroom_load.MAX_SESSIONS)
    spread = 2.0 if args.quick else args.spread
    model = tiny_model() if args.model == "tiny" else _app.resolve_model(args.model)

    from core import settings
    from core.classroom.store import FILE_NAME, ClassStore
    from core.model.budget import nbytes_of
    from core.model.loading import load_model

    model_bytes = nbytes_of(load_model(model, masked_lm=True).masked_lm)
    for suffix in ("", "-wal", "-shm"):  # a fresh class (an old write-ahead log would be replayed into a new file)
        (_app.OUT / "server-cache" / (FILE_NAME + suffix)).unlink(missing_ok=True)
    # Every student connects from STUDENT_ADDRESS: one device per session, not per address (the default since issue 44).
    env = {"BERTLENS_CLASS": "1", "BERTLENS_TEACHER_ADDRESSES": TEACHER_ADDRESSES, "BERTLENS_CLASS_DEVICE": "browser"}
    with _app.served(model, env) as (server, _), _app.chromium() as browser:
        store = ClassStore(Path(server.log).parent / FILE_NAME)
        info, question_id, question = ask(store, model)
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=classroom_load.sample_rss, args=(server.process.pid, stop, peak), daemon=True)
        sampler.start()
        teacher = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        teacher.goto(f"{server.url}/masked?{urlencode({'model': model, 'a': TEXT})}")
        teacher.wait_for_function(f"() => ({ANSWERS})() === '0'", timeout=args.timeout * 1000)
        # A class starts once the server is up: its warm-up (imports, the default model's load) done, not competing
        # with the first answers for the CPU.
        warm_deadline = time.perf_counter() + args.timeout
        while not _app.warm_up_line(server) and time.perf_counter() < warm_deadline:
            time.sleep(0.2)
        outcome: dict = {}
        base = server.url.replace("localhost", "127.0.0.1")  # IPv4, like the student address it connects from
        crowd = threading.Thread(target=lambda: outcome.update(zip(
            ("started", "acknowledged", "errors"),
            students(base, info.code, question.choices, n, spread, args.timeout))))
        crowd.start()
        shown, full_at, crowd_done = None, None, None
        deadline = time.perf_counter() + args.timeout
        while time.perf_counter() < deadline:
            shown = teacher.evaluate(ANSWERS)
            if shown == str(n):
                full_at = time.perf_counter()
                break
            if not crowd.is_alive():
                crowd_done = crowd_done or time.perf_counter()
                if time.perf_counter() - crowd_done > 10:  # every student is done and the count never completed
                    break
            time.sleep(0.05)
        crowd.join()
        stop.set()
        sampler.join()
        answers = store.answers(question_id)
        warm_up = _app.warm_up_line(server)
    sent = Counter(question.choices[i % len(question.choices)] for i in range(n))
    acks = [a for a in outcome["acknowledged"] if a is not None]
    waits = [a - s for s, a in zip(outcome["started"], outcome["acknowledged"]) if a is not None and s is not None]
    first_join = min(s for s in outcome["started"] if s is not None)
    last_ack = max(acks, default=None)
    result = {
        "students": n, "spread_s": spread, "model": args.model,
        "acknowledged": len(acks), "stored": len(answers), "devices_once": len({a.device_id for a in answers}) == len(answers),
        "stored_per_choice_equals_sent": dict(Counter(a.text for a in answers)) == dict(sent),
        "all_answered_within_s": (last_ack - first_join) if last_ack else None,
        "join_to_received_median_s": statistics.median(waits) if waits else None,
        "join_to_received_max_s": max(waits, default=None),
        "teacher_count_shown": shown,
        "teacher_count_complete_after_last_answer_s": (full_at - last_ack) if full_at and last_ack else None,
        "server_peak_rss_mib": peak[0] / 2**20,
        "budget_mib": (settings.encoding_cache_bytes() + model_bytes) / 2**20,
        "warm_up": warm_up, "errors": outcome["errors"][:3], "load": _app.load_line(), "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

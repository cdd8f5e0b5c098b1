"""Module-level work functions for the process-job tests (a child process must import them by name)."""

from __future__ import annotations

import time

from core.progress import check_stop


def count(n: int, delay: float, progress, should_stop) -> dict:
    for i in range(n):
        check_stop(should_stop)
        time.sleep(delay)
        progress(i + 1, n, f"step {i + 1}")
    return {"counted": n}


def fail(message: str, progress, should_stop) -> None:
    progress(1, 2)
    raise RuntimeError(message)

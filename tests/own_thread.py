"""Running asyncio code from a test: Playwright's sync API keeps an event loop running in the main thread once a
browser test has started it (the browser fixture lives for the whole session), and asyncio.run() refuses to start
inside a running loop. A fresh thread has none."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def in_own_thread(function, *args, **kwargs):
    """function(*args, **kwargs) run in a new thread; its result, or its exception raised here."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args, **kwargs).result()

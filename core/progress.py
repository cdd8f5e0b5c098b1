"""Progress reporting and cancellation shared by every long pass (encoding a corpus, training, sweeps)."""

from __future__ import annotations

from typing import Callable, Optional

# progress(done, total): called after each batch; done and total count inputs, not batches.
ProgressCallback = Optional[Callable[[int, int], None]]
# should_stop(): polled between batches; True ends the pass with Cancelled.
StopCheck = Optional[Callable[[], bool]]


class Cancelled(Exception):
    """A long pass was stopped by its caller; nothing partial is returned."""


def check_stop(should_stop: StopCheck) -> None:
    if should_stop is not None and should_stop():
        raise Cancelled("stopped by the user")

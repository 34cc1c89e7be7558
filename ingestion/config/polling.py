"""The one polling loop: a long-running AWS operation (an export, an EMR job run or step) asked
for its state until it settles, with a progress line each time it has not."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from ingestion.config.errors import LakehouseError

Detail = TypeVar("Detail")


class StillRunning(LakehouseError):
    """``poll_until`` past its timeout (each caller words it for its operation)."""

    def __init__(self, state: str, seconds: float) -> None:
        super().__init__(f"still {state} after {seconds:.0f}s")
        self.state = state
        self.seconds = seconds


def poll_until(
    check: Callable[[], tuple[str, Detail]],
    settled: Collection[str],
    what: str,
    poll_seconds: float,
    report: Callable[[str], Any],
    timeout_seconds: float = math.inf,
) -> tuple[str, Detail, float]:
    """Call ``check`` -> (state, detail) every ``poll_seconds`` until the state is one of
    ``settled``; return (state, detail, seconds waited). Each unsettled answer reports
    ``<what>: <state>, <seconds>s so far``; past ``timeout_seconds``, ``StillRunning``."""
    started = time.monotonic()
    while True:
        state, detail = check()
        elapsed = time.monotonic() - started
        if state in settled:
            return state, detail, elapsed
        if elapsed > timeout_seconds:
            raise StillRunning(state, elapsed)
        report(f"{what}: {state}, {elapsed:.0f}s so far")
        time.sleep(poll_seconds)

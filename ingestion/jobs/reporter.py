"""What a job tells the person who runs it, as it goes: the ``Reporter`` a command passes in.

A job says what happened (a line, the ingest summary, drift, a merge's counts) at the moment it
happens; how that looks (tables, colours, a file) is the caller's: the CLI prints it
(``cli.output.Console``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ingestion.merge.merge_counts import MergeCounts
from ingestion.staging.drift import Drift
from ingestion.staging.exports import IngestResult


class Reporter(Protocol):
    def line(self, text: str) -> None:
        """One line of progress or outcome."""

    def ingested(self, results: Sequence[IngestResult]) -> None:
        """The summary of the exports staged by one command."""

    def drift(self, drift: Sequence[Drift]) -> None:
        """Values staged that did not fit their column."""

    def merged(self, counts: Sequence[MergeCounts], seconds: float) -> None:
        """What a merge changed per final table."""

"""Fault points: named places in the production code where the crash tests (``make
test-faults``) kill the process. ``LAKEHOUSE_FAULT=<point>`` kills it (SIGKILL, as ``kill -9``
would) when it reaches that point; unset, ``point`` does nothing.

Points: ``before-staging-commit`` (a batch decoded, its commit not started);
``after-staging-commit`` (a batch and its ledger entry are committed, nothing merged yet);
``after-stream-commit`` (change files staged, none deleted yet); ``during-stream-cleanup`` (the
first of them deleted, the others not); ``during-merge`` (dbt has issued the MERGE into a final
table); ``after-merge-commit`` (dbt run committed, the merge log does not know the batches yet);
``before-rebuild-commit`` (a rebuild or a drift adoption has derived the wider columns, its
replace not committed); ``after-rebuild-commit`` (the replace and its types are committed, the
commits it overwrote not staged again, the final table not refreshed).
"""

from __future__ import annotations

import os
import signal


def point(name: str) -> None:
    if os.environ.get("LAKEHOUSE_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)

"""The full exports a merge's re-baseline rule needs (macros/baseline.sql), from the ledger: no
scan of the change log's snapshot rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ingestion.catalog.ledger import Entry
from ingestion.config import clock
from ingestion.sources import manifest


def full_exports(
    ledgers: dict[str, list[Entry]], batches: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """``full_export_versions`` of each table (by name: its ledger), as `dbt run` and `dbt test`
    take them: the tests apply the same re-baseline rule as the merge
    (``dynamodb_leaves_a_row``)."""
    batches = batches or {}
    found = {n: full_export_versions(e, batches.get(n, [])) for n, e in ledgers.items()}
    return {name: versions for name, versions in found.items() if versions is not None}


def full_export_versions(entries: list[Entry], batches: list[str]) -> dict[str, Any] | None:
    """The versions of the re-baseline rule (macros/baseline.sql) from the ledger, for a merge of
    ``batches`` into a table whose ledger is ``entries``: the newest full export staged (``newest``)
    and the newest among the batches (``among_batches``), each an export time in microseconds or
    None, and every full export's (``all``). A full export's rows are all `snapshot` at its export
    time, so this is what a `max(_version)` of the change log's snapshot rows finds, without that
    scan (two a merge, growing with the table): unless the export held no item, or retention pruned
    every row of it, where the ledger still knows the export and the scan did not. None when the
    ledger cannot say (no entry at all, or a full export's entry without its time): the macros then
    scan."""
    newest: int | None = None
    among: int | None = None
    every: set[int] = set()
    if not entries:
        return None
    for entry in entries:
        if entry.kind != manifest.FULL:
            continue
        if not entry.end:
            return None
        version = clock.epoch_micros(datetime.fromisoformat(entry.end))
        every.add(version)
        newest = version if newest is None else max(newest, version)
        if entry.batch_id in batches:
            among = version if among is None else max(among, version)
    # ``all``: every full export's version, for the history's late closes (macros/history.sql).
    return {"newest": newest, "among_batches": among, "all": sorted(every)}

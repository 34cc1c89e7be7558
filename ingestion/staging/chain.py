"""The chain of a table's exports: what time the applied exports cover, and whether a new export
may be staged (checked before anything is staged).

The newest full export covers everything up to its ``exportTime`` (it is the whole table then);
each incremental export applied after it covers its window ``[exportFromTime, exportToTime)``. A
new incremental export:

- may overlap the full export: windows fall on whole minutes while a full export's time has
  milliseconds, so the loss-free first window starts just before it. The overlapping changes are
  applied again and change nothing (an incremental line's version is its window's end, newer than
  the export; the merge keeps the newer of equal states). The run says so.
- must not overlap an applied incremental window (an export applied twice under another id, or a
  window cut differently): refused.
- must start where covered time ends (the full export's time or an applied window's end);
  otherwise it leaves a gap, accepted only with ``--allow-gap``. A later export whose window lies
  in an open gap fills it (its changes are older than what follows, and the version order keeps
  the newer ones); ``status`` lists the gaps still open.

Decision: gaps and fillings are derived from the windows the ledger records, not recorded
separately: the ledger is the one record, and a derived view cannot disagree with it.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from ingestion.catalog.ledger import Entry
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema.types import SchemaError
from ingestion.sources import export_control
from ingestion.sources.manifest import FULL, INCREMENTAL, Export, ExportError, Window


class ChainError(ExportError):
    """An export does not continue the table's chain of exports; nothing was staged."""


@dataclass(frozen=True)
class Coverage:
    """The time the applied exports cover: up to the newest full export, then windows."""

    baseline: datetime | None  # the newest full export's time
    windows: tuple[Window, ...]  # incremental windows ending after it, by start

    def gaps(self) -> list[Window]:
        """The open gaps between the baseline and the last window."""
        found = []
        covered = self.baseline
        for window in self.windows:
            if covered is not None and window.start > covered:
                found.append(Window(covered, window.start))
            covered = window.end if covered is None else max(covered, window.end)
        return found

    def ends(self) -> set[datetime]:
        """Where an export may start without a gap."""
        return {w.end for w in self.windows} | ({self.baseline} if self.baseline else set())


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def coverage(ledger: list[Entry]) -> Coverage:
    exports = [e for e in ledger if e.kind in (FULL, INCREMENTAL)]
    fulls = [t for e in exports if e.kind == FULL and (t := _time(e.end))]
    baseline = max(fulls, default=None)
    windows = []
    for e in exports:
        start, end = _time(e.start), _time(e.end)
        if e.kind == INCREMENTAL and start and end and (baseline is None or end > baseline):
            windows.append(Window(start, end))
    return Coverage(baseline, tuple(sorted(windows, key=lambda w: (w.start, w.end))))


def last_export_end(ledger: list[Entry]) -> datetime | None:
    """Where the next incremental export starts: the end of the last applied export."""
    ends = [t for e in ledger if e.kind in (FULL, INCREMENTAL) and (t := _time(e.end))]
    return max(ends, default=None)


def open_gaps(ledger: list[Entry]) -> list[Window]:
    return coverage(ledger).gaps()


def check_source(table: TableConfig, export: Export) -> None:
    """The export is of the table's own DynamoDB table (its name, and its ARN when the entry
    sets one): checked before anything is staged, so another table's export can never become a
    table's first one."""
    wanted = table.table_arn or f"table/{table.dynamodb_name}"
    found = export.table_arn if table.table_arn else f"table/{export.table_name}"
    if found != wanted:
        raise ChainError(
            f"{export.folder}: an export of {export.table_arn}, but table {table.name} is "
            f"DynamoDB {wanted}: nothing staged. Give {table.name}'s own exports, or register "
            f"the other table: ddb-lakehouse add-table {export.table_name} --partition-key ..."
        )


def check_stageable(table: TableConfig, export: Export, rebaseline: bool = False) -> None:
    """``check_source``, the keys' types against the first data line (``check_key_types``), and
    an export ``verify`` took is staged only to repair the table."""
    check_source(table, export)
    check_key_types(table, export)
    if export_control.is_verify_folder(str(export.folder)) and not rebaseline:
        raise ChainError(
            f"{export.folder}: an export verify took (under {export_control.VERIFY_PREFIX}/): "
            f"sync and ingest never stage one. To make {table.name} equal to it: "
            f"ddb-lakehouse verify --table {table.name} {export.folder} --repair"
        )


def check_key_types(table: TableConfig, export: Export) -> None:
    """A key whose DynamoDB type in every one of the export's first lines (up to 10) contradicts
    the table's declared key type (``--partition-key pk:N`` for a string key) is refused before
    Spark starts, as detection would refuse it after a scan. Lines that disagree are damage,
    not a wrong configuration: the ingest names the item and its file."""
    lines = _first_lines(export, 10)
    for key in table.keys:
        found = {
            _descriptor((line.get("Item") or line.get("Keys") or {}).get(key.name))
            for line in lines
        }
        if len(found) == 1 and None not in found and key.descriptor not in found:
            raise SchemaError(
                f"table {table.name}: key attribute {key.name!r} is declared {key.descriptor} but "
                f"the data holds {found.pop()} (the first {len(lines)} line(s) of "
                f"{export.folder}): check the table's partition_key/sort_key in dbt_project.yml "
                "(nothing staged)"
            )


def _first_lines(export: Export, count: int) -> list[dict[str, Any]]:
    """Up to ``count`` data lines (as JSON) of the first data file with items, without Spark;
    none when unreadable (the ingest, which reads every line, reports that clearly)."""
    try:
        data_file = next(f for f in export.files if f.item_count)
        with data_file.path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
            lines = [json.loads(t) for t in islice(filter(str.strip, text), count)]
    except Exception:  # noqa: BLE001 - no data file, or a missing or damaged one
        return []
    return lines if all(isinstance(line, dict) for line in lines) else []


def _descriptor(value: object) -> str | None:
    return next(iter(value)) if isinstance(value, dict) and len(value) == 1 else None


def check_chain(ledger: list[Entry], export: Export, allow_gap: bool = False) -> str | None:
    """Refuse an export that does not continue the chain (naming expected and found times);
    return a line for the run summary when it overlaps the full export, leaves or fills a gap.
    (A full export staged to repair the table is checked by ``check_rebaseline`` instead.)"""
    where = f"{export.folder}: {export.export_type} {export.export_id}"
    applied = [e for e in ledger if e.kind in (FULL, INCREMENTAL)]
    if applied and applied[-1].table_arn and export.table_arn != applied[-1].table_arn:
        raise ChainError(
            f"{where} is an export of {export.table_arn}, but this table's exports come from "
            f"{applied[-1].table_arn}: nothing staged"
        )
    last_end = last_export_end(ledger)
    if export.export_type == FULL:
        if last_end and export.export_time and export.export_time < last_end:
            raise ChainError(
                f"{where} is a full export at {export.export_time.isoformat()}, older than the "
                f"changes already applied (up to {last_end.isoformat()}): applying it would roll "
                "the table back; nothing staged"
            )
        return None
    assert export.export_from_time and export.export_to_time
    return _check_window(
        coverage(ledger), Window(export.export_from_time, export.export_to_time), where, allow_gap
    )


def check_rebaseline(ledger: list[Entry], export: Export, table: str) -> str | None:
    """A full export staged to repair the table (``verify --repair``): its items become the
    state of every key at its time, and a change staged after that time still wins by its
    version. It must be newer than the table's newest staged full export: under an older one,
    the baseline rule of the newer (``macros/baseline.sql``) would delete what it restores; and
    one already staged would change nothing (its rows are no newer than what they made). A line
    for the run summary when it is older than changes applied."""
    where = f"{export.folder}: {export.export_type} {export.export_id}"
    if export.export_type != FULL:
        raise ChainError(
            f"{where}: only a full export can repair a table (it holds every item); nothing staged"
        )
    again = (
        f"Take a new export: ddb-lakehouse verify --table {table} --from-dynamodb --repair; "
        f"nothing staged"
    )
    if export.export_arn in {e.source for e in ledger}:
        raise ChainError(f"{where} is already staged, as the table's baseline. {again}")
    baseline = coverage(ledger).baseline
    if export.export_time is None or (baseline is not None and export.export_time <= baseline):
        at = export.export_time.isoformat() if export.export_time else "an unknown time"
        raise ChainError(
            f"{where} is a full export at {at}, not newer than the table's newest staged full "
            f"export ({baseline.isoformat() if baseline else '-'}): it cannot repair the table. "
            + again
        )
    last_end = last_export_end(ledger)
    if last_end is not None and export.export_time < last_end:
        return (
            f"{where} at {export.export_time.isoformat()} staged as a re-baseline (--repair): "
            f"the changes applied after it (up to {last_end.isoformat()}) still win by version"
        )
    return None


def _check_window(cover: Coverage, new: Window, where: str, allow_gap: bool) -> str | None:
    found = new.start.isoformat()
    if cover.baseline is None and not cover.windows:
        if allow_gap:
            return (
                f"{where}: no full export before it: the history before {found} is missing "
                f"(--allow-gap)"
            )
        raise ChainError(
            f"{where} starts at {found}, but the table has no full export yet: ingest the full "
            "export whose exportTime starts the chain first (or pass --allow-gap to accept "
            "the missing history); nothing staged"
        )
    for window in cover.windows:
        if new.start < window.end and window.start < new.end:
            raise ChainError(
                f"{where} overlaps what is applied: its window {found} -> {new.end.isoformat()} "
                f"overlaps the applied window {window.start.isoformat()} -> "
                f"{window.end.isoformat()} (an export applied out of order, or twice under another "
                "id); nothing staged"
            )
    if cover.baseline is not None and new.end <= cover.baseline:
        raise ChainError(
            f"{where} overlaps what is applied: its window ends at {new.end.isoformat()}, before "
            f"the full export at {cover.baseline.isoformat()} that holds its changes; nothing "
            f"staged"
        )
    gaps = cover.gaps()
    filled = [g for g in gaps if new.start == g.start]
    if cover.baseline is not None and new.start < cover.baseline:
        note = (
            f"{where} overlaps the full export at {cover.baseline.isoformat()} by "
            f"{cover.baseline - new.start}: the changes before it are applied again and change "
            f"nothing"
        )
    elif new.start in cover.ends():
        note = None
    else:
        covered_before = max((t for t in cover.ends() if t < new.start), default=None)
        expected = covered_before.isoformat() if covered_before else "the full export's time"
        if not allow_gap:
            raise ChainError(
                f"{where} leaves a gap: expected exportFromTime {expected} (the end of the last "
                f"applied export), found {found}. Ingest the missing export first, or pass "
                "--allow-gap to accept the gap; nothing staged"
            )
        note = f"{where} leaves a gap from {expected} to {found} (--allow-gap): status lists it"
    if filled:
        gap = filled[0]
        rest = (
            ""
            if new.end >= gap.end
            else f"; {new.end.isoformat()} -> {gap.end.isoformat()} is still open"
        )
        fill = f"{where} fills the gap {gap.start.isoformat()} -> {gap.end.isoformat()}{rest}"
        note = f"{note}; {fill}" if note else fill
    return note

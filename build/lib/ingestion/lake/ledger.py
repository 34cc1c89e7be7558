"""The ledger of applied sources: which exports a table's staging change log holds, in commit order.

Each staging commit carries its ledger entry in its Iceberg snapshot summary (the same commit as
its rows: a crash can never leave one without the other). ``rebuild`` carries every entry into
its own commit (``dynamodb-lakehouse.ledger``). The chain rule of DynamoDB exports is checked here
before anything is staged: the first incremental starts at the full export's ``exportTime``,
each next one at the previous ``exportToTime``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.sources.manifest import FULL, Export, ExportError

PREFIX = "dynamodb-lakehouse."
SOURCE, BATCH, KIND, TABLE_ARN, START, END = (
    PREFIX + k for k in ("source", "batch-id", "kind", "table-arn", "from", "to")
)
LEDGER = PREFIX + "ledger"  # JSON list of every entry, written by a rebuild
MAINTAINED = PREFIX + "maintained"  # on the ledger checkpoint `maintain` commits
FILES = PREFIX + "files"  # a stream batch: its change files, one name per line
STREAM = "STREAM"  # the kind of a batch of stream change files


class ChainError(ExportError):
    """An export does not continue the table's chain of exports; nothing was staged."""


@dataclass(frozen=True)
class Entry:
    source: str
    batch_id: str
    kind: str  # FULL_EXPORT | INCREMENTAL_EXPORT
    table_arn: str | None
    start: str | None  # ISO-8601: full export: exportTime; incremental: exportFromTime
    end: str | None  # full export: exportTime; incremental: exportToTime
    committed_at: str = ""
    files: str = ""  # STREAM: the change files staged, one name per line

    @property
    def file_names(self) -> set[str]:
        return set(self.files.splitlines())


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def entry_for(export: Export, batch_id: str) -> Entry:
    full = export.export_type == FULL
    return Entry(
        source=export.export_arn,
        batch_id=batch_id,
        kind=export.export_type,
        table_arn=export.table_arn,
        start=_iso(export.export_time if full else export.export_from_time),
        end=_iso(export.export_time if full else export.export_to_time),
    )


def snapshot_properties(entry: Entry) -> dict[str, str]:
    values = {
        SOURCE: entry.source,
        BATCH: entry.batch_id,
        KIND: entry.kind,
        TABLE_ARN: entry.table_arn,
        START: entry.start,
        END: entry.end,
        FILES: entry.files or None,
    }
    return {k: v for k, v in values.items() if v is not None}


def entries(spark: SparkSession, table: str) -> list[Entry]:
    """The ledger, in commit order."""
    if not spark.catalog.tableExists(names.staging_table(table)):
        return []
    rows = (
        spark.table(f"{names.staging_table(table)}.snapshots")
        .select("committed_at", "summary")
        .where(
            F.col("summary").getItem(SOURCE).isNotNull()
            | F.col("summary").getItem(LEDGER).isNotNull()
        )
        .orderBy("committed_at", "snapshot_id")
        .collect()  # one row per commit: small by construction
    )
    found: dict[str, Entry] = {}
    for row in rows:
        summary = row["summary"]
        if summary.get(LEDGER):
            for carried in json.loads(summary[LEDGER]):
                found.setdefault(carried["source"], Entry(**carried))
        if summary.get(SOURCE):
            # The first commit of a source counts: a second one (two processes staging one
            # export at once) removes its rows again (staging.append_batch).
            found.setdefault(
                summary[SOURCE],
                Entry(
                    summary[SOURCE],
                    summary.get(BATCH, ""),
                    summary.get(KIND, FULL),
                    summary.get(TABLE_ARN),
                    summary.get(START),
                    summary.get(END),
                    row["committed_at"].isoformat(),
                    summary.get(FILES, ""),
                ),
            )
    return list(found.values())


def carried(spark: SparkSession, table: str) -> str:
    """Every entry as JSON, for a commit that replaces the table (``rebuild``)."""
    return json.dumps([asdict(e) for e in entries(spark, table)])


def stream_source(location: str, batch_id: str) -> str:
    """The ledger source of one stream batch: the stream folder and the batch."""
    return f"{location}#{batch_id}"


def staged_files(ledger: list[Entry], location: str) -> set[str]:
    """The change files of the stream at ``location`` that the ledger holds."""
    return {
        name
        for e in ledger
        if e.kind == STREAM and e.source.startswith(location + "#")
        for name in e.file_names
    }


def last_export_end(ledger: list[Entry]) -> datetime | None:
    """Where the next incremental export starts: the end of the last applied export."""
    ends = [e.end for e in ledger if e.kind in (FULL, "INCREMENTAL_EXPORT") and e.end]
    return datetime.fromisoformat(max(ends)) if ends else None


def check_chain(ledger: list[Entry], export: Export, allow_gap: bool = False) -> None:
    """Refuse an export that does not continue the chain (naming expected and found times)."""
    where = f"{export.folder}: {export.export_type} {export.export_id}"
    applied = [e for e in ledger if e.kind in (FULL, "INCREMENTAL_EXPORT")]
    if applied and applied[-1].table_arn and export.table_arn != applied[-1].table_arn:
        raise ChainError(
            f"{where} is an export of {export.table_arn}, but this table's exports come from "
            f"{applied[-1].table_arn}: nothing staged"
        )
    last_end = max((e.end for e in applied if e.end), default=None)
    if export.export_type == FULL:
        found = _iso(export.export_time)
        if last_end and found and found < last_end:
            raise ChainError(
                f"{where} is a full export at {found}, older than the changes already applied "
                f"(up to {last_end}): applying it would roll the table back; nothing staged"
            )
        return
    found = _iso(export.export_from_time)
    if last_end is None:
        if allow_gap:
            return
        raise ChainError(
            f"{where} starts at {found}, but the table has no full export yet: ingest the full "
            "export whose exportTime starts the chain first (or pass --allow-gap to accept "
            "the missing history); nothing staged"
        )
    if found == last_end:
        return
    if found and found > last_end:
        if allow_gap:
            return
        raise ChainError(
            f"{where} leaves a gap: expected exportFromTime {last_end} (the end of the last "
            f"applied export), found {found}. Ingest the missing export first, or pass "
            "--allow-gap to accept the gap; nothing staged"
        )
    raise ChainError(
        f"{where} overlaps what is applied: expected exportFromTime {last_end}, found {found} "
        "(an export applied out of order, or twice under another id); nothing staged"
    )

"""The ledger of applied sources: which exports a table's staging change log holds, in commit order.

Each staging commit carries its ledger entry in its Iceberg snapshot summary (the same commit as
its rows: a crash can never leave one without the other). ``rebuild`` carries every entry into
its own commit (``dynamodb-lakehouse.ledger``). ``staging.chain`` reads it to check that an export
continues the table's chain of exports.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from pyspark.sql import SparkSession

from ingestion.catalog import table_metadata
from ingestion.catalog.table_metadata import Reader
from ingestion.config import names
from ingestion.sources.manifest import FULL, Export

_KEYS = names.SUMMARY_KEYS  # the snapshot-summary keys, written once in config/names
SOURCE, BATCH, KIND, TABLE_ARN, START, END = (
    _KEYS[k] for k in ("source", "batch_id", "kind", "table_arn", "start", "end")
)
LEDGER = _KEYS["ledger"]  # JSON list of every entry, written by a rebuild
MAINTAINED = _KEYS["maintained"]  # on the ledger checkpoint `maintain` commits
FILES = _KEYS["files"]  # a stream batch: its change files, one name per line
STREAM = "STREAM"  # the kind of a batch of stream change files


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


def entries(where: SparkSession | Reader, table: str) -> list[Entry]:
    """The ledger, in commit order, from the staging table's metadata (no Spark job): through
    a Spark session's catalog, or through a reader (``table_metadata.files`` without a JVM)."""
    staging = names.STAGING_OF.get(table, table)
    table_metadata.READS[("ledger", staging)] += 1
    reader = table_metadata.reader(where) if isinstance(where, SparkSession) else where
    metadata = reader.read(names.STAGING, staging)
    if metadata is None:
        return []
    return entries_from([(s.committed_at, s.summary) for s in metadata.snapshots])


def entries_from(commits: list[tuple[datetime, dict[str, str]]]) -> list[Entry]:
    """The ledger from the staging table's commits (time, snapshot summary), whatever read them:
    in commit order, the first commit of a source counting."""
    found: dict[str, Entry] = {}
    for committed_at, summary in sorted(commits, key=lambda c: c[0]):
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
                    committed_at.isoformat(),
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

"""Maintenance of a final table that never breaks a running query.

Compaction only: ``rewrite_data_files`` turns small files and files with position deletes into
fewer, bigger files with the deletes applied, then drops the delete files that no longer apply
(``remove-dangling-deletes``). These are ordinary Iceberg commits: the files they replace stay on
storage, still referenced by the older snapshots a running query reads, so no reader ever loses a
file under it. (``rewrite_position_delete_files`` is not used: Iceberg 1.10 fails on it for a
table with an array-of-struct column, "Invalid partition field parent", as `books` has.) Nothing here expires snapshots or removes files: the ledger
of applied sources lives in the staging snapshots, and expiring them safely (keeping the ledger
and a retention longer than the longest query) is a separate, scheduled step.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ingestion.merge import FINAL_NAMESPACE
from ingestion.naming import quote_table

log = logging.getLogger(__name__)

MIN_INPUT_FILES = 5  # compact once this many small files (or files with deletes) pile up


@dataclass(frozen=True)
class Compaction:
    table: str
    data_files: tuple[int, int]  # live data files (before, after)
    delete_files: tuple[int, int]  # live position-delete files (before, after)
    rewritten_data_files: int
    seconds: float


def live_files(spark: SparkSession, table: str) -> tuple[int, int]:
    """(data files, delete files) of the table's current snapshot (metadata only)."""
    rows = (
        spark.table(f"{quote_table('lake', FINAL_NAMESPACE, table)}.files")
        .groupBy("content")
        .count()
        .collect()  # at most three rows: data, position deletes, equality deletes
    )
    counts = {r["content"]: int(r["count"]) for r in rows}
    return counts.get(0, 0), counts.get(1, 0) + counts.get(2, 0)


def compact(spark: SparkSession, table: str) -> Compaction:
    started = time.monotonic()
    name = f"{FINAL_NAMESPACE}.{table}"
    if not spark.catalog.tableExists(f"lake.{name}"):
        return Compaction(table, (0, 0), (0, 0), 0, 0.0)
    before = live_files(spark, table)
    target = quote_table(FINAL_NAMESPACE, table)  # table names are validated: no quote inside
    data = spark.sql(
        f"call lake.system.rewrite_data_files(table => '{target}', options => map("
        f"'min-input-files', '{MIN_INPUT_FILES}', 'delete-file-threshold', '1', "
        # New files get a new sequence number, so the position deletes they absorbed no longer
        # apply to any live file and are dropped (with the default `true` they would still
        # "apply" to the rewritten files by sequence number and stay). A merge committing
        # meanwhile makes the rewrite fail its validation, never apply wrongly.
        "'use-starting-sequence-number', 'false', 'remove-dangling-deletes', 'true'))"
    ).first()
    counts = data.asDict() if data else {}
    after = live_files(spark, table)
    result = Compaction(
        table,
        (before[0], after[0]),
        (before[1], after[1]),
        int(counts.get("rewritten_data_files_count") or 0),
        time.monotonic() - started,
    )
    log.info(
        "%s: data files %d -> %d, delete files %d -> %d (%.1fs)",
        name,
        *result.data_files,
        *result.delete_files,
        result.seconds,
    )
    return result

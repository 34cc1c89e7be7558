"""Maintenance of a final table that never breaks a running query.

Compaction only: ``rewrite_data_files`` (small files and files with position deletes -> fewer,
bigger files) and ``rewrite_position_delete_files``. Both are ordinary Iceberg commits: the files
they replace stay on storage, still referenced by the older snapshots a running query reads, so
no reader ever loses a file under it. Nothing here expires snapshots or removes files: the ledger
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
    rewritten_data_files: int
    added_data_files: int
    rewritten_delete_files: int
    seconds: float


def compact(spark: SparkSession, table: str) -> Compaction:
    started = time.monotonic()
    name = f"{FINAL_NAMESPACE}.{table}"
    if not spark.catalog.tableExists(f"lake.{name}"):
        return Compaction(table, 0, 0, 0, 0.0)
    target = quote_table(FINAL_NAMESPACE, table).replace("'", "''")
    data = spark.sql(
        f"call lake.system.rewrite_data_files(table => '{target}', options => map("
        f"'min-input-files', '{MIN_INPUT_FILES}', 'delete-file-threshold', '1'))"
    ).first()
    deletes = spark.sql(
        f"call lake.system.rewrite_position_delete_files(table => '{target}', options => map("
        f"'min-input-files', '{MIN_INPUT_FILES}'))"
    ).first()
    result = Compaction(
        table,
        int(data["rewritten_data_files_count"]) if data else 0,
        int(data["added_data_files_count"]) if data else 0,
        int(deletes["rewritten_delete_files_count"]) if deletes else 0,
        time.monotonic() - started,
    )
    log.info(
        "%s: compacted %d data files into %d, %d delete files rewritten (%.1fs)",
        name,
        result.rewritten_data_files,
        result.added_data_files,
        result.rewritten_delete_files,
        result.seconds,
    )
    return result

"""Ingest DynamoDB exports into a table's staging change log (the `ingest` command's library)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ingestion import manifest, staging
from ingestion.tables import TableConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    table: str
    source: str
    rows: int
    expected: int
    skipped: bool
    seconds: float


def ingest_export(spark: SparkSession, table: TableConfig, folder: str) -> IngestResult:
    """Verify an export against its manifests, then stage it in one commit (or skip it)."""
    started = time.monotonic()
    export = manifest.read_export(folder)
    log.info(
        "%s: export %s (%s, %d items in %d files) verified against its manifest",
        table.name,
        export.export_id,
        export.export_type,
        export.item_count,
        len(export.files),
    )
    if export.export_type != manifest.FULL:
        raise manifest.ExportError(
            f"{export.folder}: incremental exports are not supported yet (only full exports)"
        )
    batch = staging.stage_export(spark, export, table)
    result = IngestResult(
        table=table.name,
        source=export.export_arn,
        rows=batch.rows,
        expected=export.item_count,
        skipped=batch.skipped,
        seconds=time.monotonic() - started,
    )
    if batch.skipped:
        log.info("%s: %s is already in the ledger: nothing to do", table.name, export.export_arn)
    elif batch.rows != export.item_count:
        # Reached only if the data files hold other lines than the manifest counts.
        log.error(
            "%s: staged %d rows but the manifest lists %d items (batch %s)",
            table.name,
            batch.rows,
            export.item_count,
            batch.batch_id,
        )
    return result

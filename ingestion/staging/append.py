"""Append one batch to ``lake.staging.<table>`` in ONE Iceberg commit, with its ledger entry.

The ledger of applied sources lives in the snapshot summary of that same commit
(``dynamodb-lakehouse.source``), so data and ledger entry are committed together or not at all.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ingestion import fault_points
from ingestion.catalog import ledger, schema_choice, table_metadata
from ingestion.config import clock, names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import decode
from ingestion.dynamodb.entities import ENTITY_COLUMN
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import sql_string
from ingestion.schema import item_json, typed_columns, typed_rows
from ingestion.schema.types import METADATA_COLUMNS, Schema
from ingestion.sources.manifest import FULL, Export
from ingestion.spark import java_errors
from ingestion.staging import staging_table
from ingestion.staging.drift import Drift, drift_report

log = logging.getLogger(__name__)


class StagingError(LakehouseError):
    """A batch could not be staged; nothing of it was committed."""


@dataclass(frozen=True)
class StagedBatch:
    table: str
    source: str
    batch_id: str
    rows: int
    skipped: bool  # the source was already in the ledger
    drift: tuple[Drift, ...] = ()
    newest_version: int | None = None  # the highest _version staged
    ingested_at: datetime | None = None
    unmatched: int = 0  # a single-table design's changes of no listed entity value


def applied_sources(spark: SparkSession, table: str) -> set[str]:
    """Sources recorded in the ledger (the staging table's snapshot summaries)."""
    return {e.source for e in ledger.entries(spark, table)}


def staging_rows(
    lines: DataFrame,
    columns: tuple[F.Column, F.Column, F.Column],
    schema: Schema,
    source: str,
    batch_id: str,
    ingested_at: datetime,
) -> DataFrame:
    """Lines of DynamoDB JSON (``value``) as staging rows: typed columns, the remainder
    (``_rest``), metadata, and the whole item (``_image``), which only a table staged before
    decision 0012 keeps (``staging_table.prepared`` chooses; Spark computes neither column for
    a table that does not keep it). ``columns`` gives each line's (``_operation``,
    ``_version``, ``_sequence``)."""
    operation, version, sequence = columns
    return (
        lines.transform(decode.with_envelope)
        .withColumn("_operation", operation)
        .withColumn("_version", version)
        .withColumn("_sequence", sequence)
        .transform(decode.with_image)
        .transform(typed_rows.typed_rows(schema, schema.table))
        .withColumn("_source", F.lit(source))
        .withColumn("_batch_id", F.lit(batch_id))
        .withColumn("_ingested_at", F.timestamp_micros(F.lit(clock.epoch_micros(ingested_at))))
        .select(*typed_rows.row_columns(schema), *METADATA_COLUMNS, item_json.IMAGE)
    )


def read_export(
    spark: SparkSession, export: Export, schema: Schema, batch_id: str, ingested_at: datetime
) -> DataFrame:
    """The export's rows as staging rows: typed columns, raw image and metadata."""
    lines = spark.read.text([str(f.path) for f in export.files])
    operation, version = decode.change_columns(
        export.export_type == FULL, export.version_micros, export.output_view == "NEW_IMAGE"
    )
    columns = (operation, version, F.lit(None).cast("string"))
    return staging_rows(lines, columns, schema, export.export_arn, batch_id, ingested_at)


class StagedNewAttributes(StagingError, schema_choice.NewAttributes):
    """A batch holds attributes its types lack (the decode's ``NEW_ATTRIBUTES``)."""


class StagedSampleMisfit(StagingError, schema_choice.SampleMisfit):
    """A batch holds values its first items' types do not describe (``SAMPLE_MISFIT``)."""


def _staging_error(exc: Exception) -> type[StagingError]:
    """The error a failed write raises, typed by what the decode raised: the message of its
    ``raise_error`` (``java_errors.raised``), which begins with its mark."""
    raised = java_errors.raised(exc) or ""
    if raised.startswith(typed_columns.NEW_ATTRIBUTES):
        return StagedNewAttributes
    if raised.startswith(typed_columns.SAMPLE_MISFIT):
        return StagedSampleMisfit
    return StagingError


def spark_reason(exc: Exception) -> str:
    """The useful line of a Spark failure: our raise_error message when there is one."""
    raised = java_errors.raised(exc)
    if raised is not None:
        return raised.splitlines()[0] if raised.strip() else raised
    text = str(exc)
    reading = re.search(r"while reading file (\S+?)\.?(?:\s|$)", text)
    where = f" (while reading {reading.group(1)})" if reading else ""
    for line in text.splitlines():
        if "Exception" in line or "Error" in line:
            return line.strip()[:500] + where
    return text[:500] + where


def new_batch_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def stage_export(
    spark: SparkSession, export: Export, table: TableConfig, schema: Schema
) -> StagedBatch:
    """Append a (verified) export to the staging table, unless the ledger already has it."""
    if export.export_arn in applied_sources(spark, table.name):
        return StagedBatch(table.name, export.export_arn, "", 0, skipped=True)
    ingested_at = clock.utc_now()
    batch_id = new_batch_id(ingested_at)
    rows = read_export(spark, export, schema, batch_id, ingested_at)
    return append_batch(
        spark, table, rows, ledger.entry_for(export, batch_id), export.folder, ingested_at, schema
    )


def append_batch(
    spark: SparkSession,
    table: TableConfig,
    rows: DataFrame,
    entry: ledger.Entry,
    where: object,
    ingested_at: datetime,
    schema: Schema,
) -> StagedBatch:
    """Append ``rows`` (typed by ``schema``) to the staging table in ONE commit whose snapshot
    summary is ``entry``."""
    try:
        rows, create = staging_table.prepared(spark, table, rows, schema)
    except staging_table.CreatedMeanwhile:
        raise StagingError(
            f"{table.name}: nothing staged from {where}: {_meanwhile(table)}"
        ) from None
    except staging_table.TypesChangedMeanwhile as exc:
        raise StagingError(f"{exc} (from {where})") from None
    observation = Observation(f"batch {entry.batch_id}")
    unmatched = F.lit(0)
    if table.entities is not None:
        unmatched = F.count(F.when(F.col(ENTITY_COLUMN) == table.entities.unmatched, 1))
    observed = rows.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.count("_drift").alias("drifted"),
        F.max("_version").alias("newest"),
        unmatched.alias("unmatched"),
    )
    properties = ledger.snapshot_properties(entry)
    fault_points.point("before-staging-commit")
    writer = (
        observed.writeTo(names.staging_table(table.name))
        .option("distribution-mode", staging_table.STAGING_DISTRIBUTION)
        .options(**{f"snapshot-property.{k}": v for k, v in properties.items()})
    )
    try:
        staging_table.written(writer, schema, create)
    except Exception as exc:  # a Spark job failure arrives as a Py4J error with the JVM trace
        reason = spark_reason(exc)
        if create and java_errors.already_exists(exc):
            reason = _meanwhile(table)
        raise _staging_error(exc)(f"{table.name}: nothing staged from {where}: {reason}") from exc
    fault_points.point("after-staging-commit")
    _keep_first_commit(spark, table.name, entry)
    metrics = observation.get
    drift = drift_report(spark, table.name, entry.batch_id) if metrics.get("drifted") else []
    return StagedBatch(
        table.name,
        entry.source,
        entry.batch_id,
        int(metrics.get("rows") or 0),  # no metrics when no task ran (an export of zero items)
        skipped=False,
        drift=tuple(drift),
        newest_version=metrics.get("newest"),
        ingested_at=ingested_at,
        unmatched=int(metrics.get("unmatched") or 0),
    )


def _meanwhile(table: TableConfig) -> str:
    return (
        f"another process created {names.staging_table(table.name)} while this one staged its "
        "first batch; run the command again (what is staged by then is skipped)"
    )


def duplicate_batches(spark: SparkSession, table: str) -> list[str]:
    """Batches of a source's second commit (two processes staged it at once) whose rows are
    still there: the losing process was killed before it removed them again. The ledger counts
    the first commit only, but a plain ``dbt run`` (batches in staging, not in the merge log)
    would merge them again and again."""
    name = names.staging_table(table)
    if not spark.catalog.tableExists(name):
        return []
    first: dict[str, str] = {}
    later = [
        batch
        for source, batch in _source_commits(spark, table)
        if first.setdefault(source, batch) != batch
    ]
    if not later:
        return []
    present = spark.table(name).where(F.col("_batch_id").isin(later)).select("_batch_id")
    return sorted({r["_batch_id"] for r in present.distinct().collect()})


def remove_duplicate_batches(spark: SparkSession, table: str) -> list[str]:
    """Delete the rows of ``duplicate_batches`` (identical to the first commit's); one commit."""
    found = duplicate_batches(spark, table)
    if found:
        listed = ", ".join(sql_string(b) for b in found)
        spark.sql(f"delete from {names.staging_table(table)} where `_batch_id` in ({listed})")
        log.warning(
            "staging.%s: removed the duplicate batch(es) %s, left by a process killed after "
            "staging a source another process had staged first",
            table,
            ", ".join(found),
        )
    return found


def _keep_first_commit(spark: SparkSession, table: str, entry: ledger.Entry) -> None:
    """Two processes staging one source at once both commit (Iceberg appends never conflict).
    The first commit counts; a later one deletes its own rows again and fails, so no row is
    staged twice (a process killed in between leaves identical rows, which a merge collapses)."""
    # One commit of this source, or two in a race.
    commits = [batch for source, batch in _source_commits(spark, table) if source == entry.source]
    if len(commits) > 1 and commits[0] != entry.batch_id:
        spark.sql(
            f"delete from {names.staging_table(table)} where `_batch_id` = "
            f"{sql_string(entry.batch_id)}"
        )
        raise StagingError(
            f"{table}: {entry.source} was staged by another process at the same time (batch "
            f"{commits[0]}); this run's copy (batch {entry.batch_id}) was removed again "
            "and nothing more is needed"
        )


def _source_commits(spark: SparkSession, table: str) -> list[tuple[str, str]]:
    """(source, batch) of each staging commit still in the table's history that staged a
    source, in commit order (the table's metadata, no Spark job)."""
    metadata = table_metadata.read(spark, names.staging_table(table))
    snapshots = sorted(
        metadata.snapshots if metadata else [], key=lambda s: (s.committed_at, s.snapshot_id)
    )
    return [
        (s.summary[ledger.SOURCE], s.summary.get(ledger.BATCH, ""))
        for s in snapshots
        if ledger.SOURCE in s.summary
    ]

"""``sync`` and ``export``: what the ledger lacks exported from DynamoDB (or given as folders,
or a stream's change files), staged, then merged into the final table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingestion.dynamodb.tables import TableConfig, TableConfigError
from ingestion.jobs import apply, stage
from ingestion.jobs.reporter import Reporter
from ingestion.sources import export_control, manifest
from ingestion.spark import spark_config
from ingestion.staging import chain, ledger


@dataclass(frozen=True)
class ExportTarget:
    """Where DynamoDB exports from and to; ``None`` takes the table's configuration."""

    table_arn: str | None = None
    to: str | None = None
    poll: float = 30.0


def export_from_dynamodb(
    table: TableConfig, target: ExportTarget, kind: str | None, reporter: Reporter
) -> list[str]:
    """Run the DynamoDB exports the ledger calls for (``kind``, or full when the ledger is empty
    and incremental after); their folders (s3://...)."""
    table_arn = target.table_arn or table.table_arn
    destination = target.to or table.export_to
    if not table_arn or not destination:
        raise TableConfigError(
            f"table {table.name}: exporting needs its table ARN and an s3:// destination "
            "(table_arn / export_to in dbt_project.yml, or --table-arn / --to)"
        )
    spark = spark_config.build_spark(f"export {table.name}")
    last_end = chain.last_export_end(ledger.entries(spark, table.name))
    folders = export_control.run_exports(
        dynamodb_client(table_arn),
        table_arn,
        destination,
        kind or (manifest.INCREMENTAL if last_end else manifest.FULL),
        last_end,
        target.poll,
        report=reporter.line,
    )
    if not folders:
        reporter.line(
            f"{table.name}: up to date (less than 15 minutes since {last_end}): nothing to export"
        )
    return folders


def dynamodb_client(table_arn: str) -> Any:
    """A DynamoDB client in the table's own region, taken from its ARN: a job on EMR has no
    ``AWS_REGION`` unless someone sets it, and a bare client then fails with NoRegionError."""
    import boto3

    return boto3.client("dynamodb", region_name=region_of(table_arn))


def region_of(arn: str) -> str:
    """The region of an ARN (``arn:PARTITION:SERVICE:REGION:ACCOUNT:...``)."""
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or not parts[3]:
        raise TableConfigError(
            f"{arn!r} is not a DynamoDB table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"
        )
    return parts[3]


def export(
    table: TableConfig, target: ExportTarget, full: bool, ingest: bool, reporter: Reporter
) -> bool:
    """``export``: one full export, or the incrementals since the last applied one; staged and
    merged unless ``ingest`` is False. False when a staged count differs from its manifest's."""
    kind = manifest.FULL if full else manifest.INCREMENTAL
    folders = export_from_dynamodb(table, target, kind, reporter)
    for folder in folders:
        reporter.line(f"exported: {folder}")
    if folders and ingest:
        if not stage.stage_exports(table, folders, reporter):
            return False
        apply.merge_tables([table], reporter)
    return True


def sync(
    table: TableConfig,
    reporter: Reporter,
    folders: list[str] | None = None,
    stream: stage.StreamSource | None = None,
    target: ExportTarget | None = None,
    allow_gap: bool = False,
) -> bool:
    """Stage one kind of source (export folders, a stream, or what DynamoDB exports now when
    ``target`` is given), then merge. False when a staged count differs from its manifest's
    (nothing is merged then)."""
    given = sum(bool(x) for x in (folders, stream, target))
    if given == 0:
        raise TableConfigError(
            "nothing to sync: give export folders, --stream LOCATION or --from-dynamodb"
        )
    if given > 1:
        raise TableConfigError("give export folders, --stream or --from-dynamodb, not both")
    if stream is not None:
        stage.stage_stream(table, stream, reporter)
    else:
        if target is not None:
            folders = export_from_dynamodb(table, target, None, reporter)
            if not folders:
                return True
        assert folders
        if not stage.stage_exports(table, folders, reporter, allow_gap):
            return False
    apply.merge_tables([table], reporter)
    return True

"""Looking without changing anything: each table's status, its types, its drift, SQL against
the lakehouse, and a final table verified against a full export of its DynamoDB table.

Spark's analysis and parse errors (a table or column that does not exist, a typo in the SQL)
are the user's to fix: ``query`` turns them into a ``QueryError`` of one line, without Spark's
query plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingestion.catalog import duckdb_engine, table_metadata, table_types
from ingestion.catalog.schema_choice import with_keys
from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs import as_of, sync
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance import verify as verifying
from ingestion.maintenance.status import TableStatus, status_without_spark, table_status
from ingestion.schema import schema_file, types
from ingestion.sources.aws_errors import aws_errors
from ingestion.spark import out_of_memory, spark_config
from ingestion.staging.drift import Drift, drift_report, drift_report_without_spark


class QueryError(LakehouseError):
    """The SQL of ``query`` does not parse, or names something the lakehouse does not hold."""


def drift(table: TableConfig) -> list[Drift]:
    """Values staged that did not fit their column, per attribute and source (without a JVM
    where the path without Spark serves: ``catalog.table_metadata.files``)."""
    if table_metadata.files() is not None:
        return drift_report_without_spark(table.name)
    return drift_report(spark_config.build_spark("drift"), table.name)


def table_schema(table: TableConfig) -> tuple[types.Schema | None, str]:
    """The table's types as every job reads them, and where they come from: kept with its
    staging table, or (before its first commit) a complete schema file; (None, why) when its
    types are still to be detected from its first export."""
    spark = spark_config.build_spark("schema")
    stored = table_types.stored_schema(spark, table)
    if stored is not None:
        return with_keys(table, stored), f"kept with {names.CATALOG}.{names.STAGING}.{table.name}"
    current = table_types.current_schema(spark, table)
    path = schema_file.schema_path(table.name)
    if current is not None:
        return with_keys(table, current), f"{path} (nothing staged with them yet)"
    return None, f"not known yet: detected from the first export staged ({path} declares none)"


def statuses(tables: list[TableConfig]) -> Iterator[TableStatus]:
    """Each table's status; without a JVM where the path without Spark serves
    (``catalog.table_metadata.files``)."""
    finals = [final for table in tables for final in final_tables(table)]  # one per entity
    if table_metadata.files() is not None:
        for final in finals:
            yield status_without_spark(final.name)
        return
    spark = spark_config.build_spark("status")
    for final in finals:
        yield table_status(spark, final.name)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: Iterator[tuple[Any, ...]]


ENGINES = ("spark", "duckdb")


def query(
    sql: str, limit: int | None, engine: str = "spark", moment: datetime | None = None
) -> QueryResult:
    """Run ``sql``; its rows (the first ``limit`` of them, or all of them streamed to the driver one
    partition at a time when ``limit`` is None). ``engine="duckdb"``: DuckDB's SQL over the tables'
    current state, no JVM (``catalog.table_metadata.files``; reads only). ``moment``: the final
    tables it names as of that instant (UTC), from their histories (``as_of``)."""
    if engine == "duckdb":
        return _duckdb_query(sql, limit, moment)
    from pyspark.errors import AnalysisException, ParseException

    spark = spark_config.build_spark("query")
    try:
        df = spark.sql(as_of.spark_sql(spark, sql, moment) if moment else sql)
    except (AnalysisException, ParseException) as exc:
        raise QueryError(_first_line(exc)) from None
    rows = df.limit(limit).collect() if limit is not None else df.toLocalIterator()
    return QueryResult(df.columns, (tuple(r) for r in rows))


def _duckdb_query(sql: str, limit: int | None, moment: datetime | None) -> QueryResult:
    if table_metadata.files() is None:
        raise QueryError(
            "--engine duckdb reads the local and rehearsal targets' catalogs with the light extra "
            "installed (pip install -e '.[light]'); use the default engine (Spark) here"
        )
    import duckdb

    try:
        con = duckdb_engine.with_views((names.STAGING, names.FINAL))
        if moment:
            as_of.duckdb_views(con, sql, moment)
        result = con.execute(sql)
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from None
    columns = [d[0] for d in result.description or []]
    rows = result.fetchmany(limit) if limit is not None else result.fetchall()
    return QueryResult(columns, (tuple(r) for r in rows))


def _first_line(exc: Exception) -> str:
    """Spark's message without the plan and the SQL state that follow it."""
    text = getattr(exc, "getMessage", lambda: str(exc))() or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def verify(
    table: TableConfig,
    folder: str | None,
    target: sync.ExportTarget | None = None,
    reporter: Reporter | None = None,
    at_export: bool = False,
) -> verifying.VerifyReport:
    """The final table of ``table`` against the full export in ``folder``
    (ingestion.maintenance.verify), or, without a folder, against a full export taken now
    (``sync.verify_export``); with ``at_export``, its history as of the export's instant."""
    spark = spark_config.build_spark("verify")
    if folder is None:  # refused before an export is paid for when there is nothing to verify
        assert target is not None and reporter is not None
        verifying.check_verifiable(spark, table)
        if at_export:
            verifying.history_table(spark, table)
        folder = sync.verify_export(table, target, reporter)
    kept = table_types.current_schema(spark, table)  # to name the likely attribute on failure
    with out_of_memory.explained(table.name, "verify", kept):
        return verifying.verify(spark, table, folder, as_of=at_export)


METRICS_NAMESPACE = names.METRICS_NAMESPACE
METRICS = (  # metric name, outcomes summed
    ("VerifyDifferences", ("missing", "extra", "different", "duplicate")),
    ("VerifyMissing", ("missing",)),
    ("VerifyExtra", ("extra",)),
    ("VerifyDifferent", ("different",)),
    ("VerifyDuplicate", ("duplicate",)),
    ("VerifyNotComparable", ("not_comparable",)),
    ("VerifyEqual", ("equal",)),
)


def publish_metrics(report: verifying.VerifyReport, table_arn: str | None) -> None:
    """The run's counts as CloudWatch metrics (one ``PutMetricData``, dimension ``Table``), in the
    table's region (from its ARN; else the job's, ``settings.aws_region``): an alarm on
    ``VerifyDifferences`` above 0 says a table stopped equalling DynamoDB, and ``doctor --aws``
    reads the last one."""
    region = sync.region_of(table_arn) if table_arn else settings.aws_region()
    with aws_errors(f"{report.table}: CloudWatch PutMetricData (the verify ran)"):
        cloudwatch_client(region).put_metric_data(
            Namespace=METRICS_NAMESPACE, MetricData=metric_data(report)
        )


def metric_data(report: verifying.VerifyReport) -> list[dict[str, Any]]:
    dimensions = [{"Name": "Table", "Value": report.table}]
    return [
        {
            "MetricName": name,
            "Dimensions": dimensions,
            "Value": float(sum(report.counts[o] for o in outcomes)),
            "Unit": "Count",
        }
        for name, outcomes in METRICS
    ]


def cloudwatch_client(region: str | None) -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=region)

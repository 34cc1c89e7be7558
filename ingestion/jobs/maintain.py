"""``maintain`` over several tables: each compacted, its ledger carried forward, old snapshots
expired and orphan files removed (``upkeep.maintenance``), then whole tables tested."""

from __future__ import annotations

from datetime import timedelta

from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.reporter import Reporter
from ingestion.merge import runner
from ingestion.spark import spark_config
from ingestion.upkeep.maintenance import maintain


def maintain_tables(
    tables: list[TableConfig],
    retention: timedelta,
    keep_snapshots: int,
    reporter: Reporter,
    check: bool = True,
) -> None:
    spark = spark_config.build_spark("maintain")
    for table in tables:
        report = maintain(spark, table, retention, keep_snapshots)
        reporter.line("\n".join(report.lines()))
    if check:
        # Merges test the keys their batches touched; the whole tables are checked here.
        checked, left = runner.full_check(spark, tables)
        if checked:
            reporter.line(f"full check (dbt test of whole tables): {', '.join(checked)}: passed")
        for name in left:
            reporter.line(
                f"full check: {name} left out (no final table, or batches not merged yet)"
            )

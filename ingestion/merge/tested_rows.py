"""What a merge's data tests read: the batches whose touched keys each table's tests look at
(``test_scope``), and those keys' rows, read once and cached for every test (``tested_views``)."""

from __future__ import annotations

import hashlib

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog.table import Table
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.schema.types import INSERTED_BATCH
from ingestion.sources import manifest
from ingestion.spark import threads


def test_scope(
    tables: list[Table],
    batches: dict[str, list[str]],
    refreshed: set[str],
    also_test: dict[str, list[str]],
) -> dict[str, list[str]]:
    """The batches whose touched keys each table's data tests look at; a table left out is
    tested whole: after a full refresh, and when a full export is among its batches (its
    re-baseline removes keys it does not hold, which no batch touches)."""
    scope = {}
    for table in tables:
        tested = [*also_test.get(table.name, []), *batches[table.name]]
        kinds = {e.batch_id: e.kind for e in table.ledger}
        if table.name in refreshed or any(kinds.get(b) == manifest.FULL for b in tested):
            continue
        scope[table.name] = tested
    return scope


# The change log's columns the scoped change-log tests read besides the keys: those of the change
# order (macros/change_order.sql, dynamodb_change_order_columns; tests/merge/test_data_tests.py
# checks the two lists agree).
CHANGE_ORDER_COLUMNS = ["_version", "_sequence", "_ingested_at", "_batch_id", "_operation"]
# The final table's columns the cached rows hold besides the keys: a row's version, which the
# merge's counts compare (merge_counts.versions).
FINAL_VERSION_COLUMNS = ["_version", "_sequence"]
FINAL_BATCH_COLUMNS = ["_batch_id", INSERTED_BATCH]


def tested_views(
    spark: SparkSession,
    tables: list[Table],
    scope: dict[str, list[str]],
    touched: TouchedKeys,
    snapshots: dict[str, int | None] | None = None,
) -> dict[str, dict[str, str]]:
    """The rows a scoped `dbt test` reads, each read once, cached, as temporary views of this
    session (dbt's session: dbt-spark's `getOrCreate` returns it): per table whose tests are
    scoped, the final table's rows of the touched keys (``final``: the key columns, `_version`
    and `_sequence`, at the table's snapshot in ``snapshots``, the merge's, when given) and
    their staged changes' keys and change-order columns (``changes``), each side only the rows
    as new as the batches' oldest change or newer (below). Without them each scoped
    test found the touched rows itself: three scans of each table a merge (bench/apply_cost.py).
    The merge's counts reuse ``final`` as the state after the merge (no touched key's row
    after a correct merge is older), and ``touched``'s keys.
    Narrow on purpose: the whole rows cost more to read than the scans they spared (a final
    table's nested attributes). A test that needs other columns reads the table
    (macros/test_scope.sql, dynamodb_tested). Entity tables of a single-table design are left
    out (their change log is a filter of the entry's, macros/entities.sql): their tests scan.
    Nothing is left behind when a read fails."""
    views: dict[str, dict[str, str]] = {}
    try:
        for table in tables:
            batches = scope.get(table.name)
            if not batches or table.config.staging:
                continue
            keys = table.key_columns
            keyed = F.broadcast(touched.of(table, batches))
            name = table.final_name
            snapshot = (snapshots or {}).get(table.name)
            final = (
                spark.sql(f"select * from {name} version as of {int(snapshot)}")
                if snapshot is not None
                else spark.table(name)
            )
            log = spark.table(table.staging_name)
            # Only the rows as new as the batches' oldest change, or newer, on both sides: Iceberg
            # skips every older file (given `_version`'s metrics: by default a table's first 100
            # columns keep them), so the reads follow the batches, not the tables' sizes.
            # The changes: every touched key's latest change is among them
            # (TouchedKeys.oldest_version). The final rows: a touched key's row after a correct
            # merge is its latest change, or a row newer than it that the version guard kept, so
            # at least that new: the rows the merge's commit wrote, and those it left because
            # they were newer. A row the merge should have replaced or deleted and did not keeps
            # its older version and is not read here: that one guarantee (the MERGE statement
            # matched every row of its keys) moves to the whole-table tests of `merge
            # --full-check` and `maintain` (docs/exports-and-the-ledger.md, "What the tests read").
            oldest = touched.oldest_version(table, batches)
            if oldest is not None:
                log = log.where(F.col("_version") >= F.lit(oldest))
                final = final.where(F.col("_version") >= F.lit(oldest))
            # The batch columns too, when the table has them: the counts tell the commit's
            # inserts from its updates by them (merge_counts.from_commit).
            counted = [c for c in FINAL_BATCH_COLUMNS if c in final.columns]
            rows = {
                "final": final.select(*keys, *FINAL_VERSION_COLUMNS, *counted).join(
                    keyed, on=keys, how="left_semi"
                ),
                "changes": log.select(*keys, *CHANGE_ORDER_COLUMNS).join(
                    keyed, on=keys, how="left_semi"
                ),
            }
            suffix = hashlib.sha256(table.name.encode()).hexdigest()[:12]
            views[table.name] = {}
            for side, frame in rows.items():
                view = f"dynamodb_tested_{side}_{suffix}"
                frame.createOrReplaceTempView(view)
                views[table.name][side] = view
                spark.catalog.cacheTable(view)
        # Read at once: each is a scan the tests would otherwise each repeat.
        cached = [view for pair in views.values() for view in pair.values()]
        threads.each(spark, lambda view: spark.table(view).count(), cached)
    except BaseException:
        drop_views(spark, views)
        raise
    return views


def drop_views(spark: SparkSession, views: dict[str, dict[str, str]]) -> None:
    """The views of ``tested_views`` dropped, and so uncached (Spark uncaches a dropped view)."""
    for pair in views.values():
        for view in pair.values():
            spark.catalog.dropTempView(view)

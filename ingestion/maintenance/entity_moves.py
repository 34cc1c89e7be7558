"""Rows of a single-table design's change log that belong to another entity now: under a key
rule a key with no ``#`` is its own entity value (``sk = PROFILE`` is entity ``PROFILE``), where
a change log staged under the rule's first reading sent such items to ``<table>__unmatched``.

Once per change log, before a merge: when its unmatched rows hold a key whose whole text is a
listed value, staging is rebuilt (each row's ``_entity`` derived again, its entity's columns
decoded from its item) and the merge then builds every final table of the entry again
(``merge.full_refresh``), so the items leave the unmatched table for their entity's. Otherwise
the change log is only marked as read this way (``staging_table.ENTITY_VALUES``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import table_metadata
from ingestion.config import names
from ingestion.dynamodb.entities import ENTITY_COLUMN
from ingestion.dynamodb.tables import TableConfig
from ingestion.maintenance import rebuild
from ingestion.staging.staging_table import ENTITY_VALUES, WHOLE_KEY


def move_before_merge(
    spark: SparkSession, table: TableConfig, guard: Callable[[], AbstractContextManager[object]]
) -> list[str]:
    """The summary lines (none when nothing moved); ``guard``: the table's lock and lease, held
    for the rebuild (``adopt.Guard``)."""
    rule = table.entities
    if rule is None or rule.by != "key":
        return []
    name = names.staging_table(table.name)
    metadata = table_metadata.read(spark, name)
    if metadata is None or metadata.properties.get(ENTITY_VALUES) == WHOLE_KEY:
        return []
    key = next(k.column for k in table.keys if k.name == rule.attribute)
    listed = [value for value, _ in rule.values]
    stale = spark.table(name).where(
        (F.col(ENTITY_COLUMN) == rule.unmatched) & F.col(key).isin(listed)
    )
    if stale.limit(1).count() == 0:
        spark.sql(f"alter table {name} set tblproperties ('{ENTITY_VALUES}'='{WHOLE_KEY}')")
        return []
    moved = stale.groupBy(key).count().collect()
    with guard():
        rebuild.rebuild_staging(spark, table)
    found = ", ".join(f"{r[key]} ({r['count']})" for r in sorted(moved, key=lambda r: r[key]))
    return [
        f"{table.name}: staged changes of keys with no '#' that are a listed entity value moved "
        f"from {rule.unmatched} to their entity table ({found}): staging rebuilt; this merge "
        "builds the entry's final tables again"
    ]

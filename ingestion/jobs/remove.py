"""``remove-table``'s lakehouse side: everything a table holds in the catalog dropped, the
table held by this process meanwhile (``guard``: no ``watch`` may run on it), its lease released
on the way out.

What later work adds to a table (a new kind of table of its own, a registry row), its removal
must remove too: ``owned`` is the one list (``tests/cli/test_first_hour.py`` checks each of them
and the merge log after a removal, then adds the table again from scratch).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ingestion.catalog import merge_log
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.maintenance import verify_log


def owned(table: TableConfig) -> list[str]:
    """The catalog tables a lakehouse table owns (quoted names): its change log, its rejects,
    its final tables (``finals``) and their histories (``history: true``, docs/history.md; also
    one left from before the key was turned off)."""
    return [
        names.staging_table(table.name),
        names.rejects_table(table.name),
        *(names.final_table(final.name) for final in finals(table)),
        *(names.final_table(names.history_table(final.name)) for final in finals(table)),
    ]


def finals(table: TableConfig) -> list[TableConfig]:
    """The final tables a table owns: itself, or a single-table design's entity tables and
    ``lakehouse.<table>`` left from before its rule was set (no entity table takes its name)."""
    return final_tables(table) + ([table] if table.entities else [])


def present(spark: SparkSession, table: TableConfig) -> list[str]:
    """The owned tables that exist, and the merge log's rows of its final tables (an item each)."""
    found = [name for name in owned(table) if spark.catalog.tableExists(name)]
    if spark.catalog.tableExists(merge_log.MERGE_LOG):
        for final in finals(table):
            if merge_log.merged_batches(spark, final.name):
                found.append(f"{merge_log.MERGE_LOG} rows of {final.name}")
    return found


def drop_table_data(table: TableConfig) -> list[str]:
    """Drop the table's staging, rejects and final tables (their files too) and its rows of the
    merge log; what was removed. The table's lease goes with the hold."""
    with held_table(table.name, "remove") as (spark, _lease):
        removed = present(spark, table)
        for name in owned(table):
            spark.sql(f"drop table if exists {name} purge")
        for final in finals(table):
            merge_log.forget_table(spark, final.name)
        verify_log.forget_table(spark, table.name)
    return removed
